//! Every `draughts.v1.Rules` RPC through a real server on 127.0.0.1:0 with the generated client, the bad
//! input of every kind with its status code, and what every host serves: health, reflection (v1 and
//! v1alpha), the echo, gRPC-Web over HTTP/1.1.

use draughts_proto::pb;
use draughts_proto::pb::rules_client::RulesClient;
use draughts_testkit::ServiceUnderTest;
use draughts_validation::Config;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use tonic::transport::Channel;

/// The validation service on 127.0.0.1:0 (the shared harness from testkit).
struct Server(ServiceUnderTest);

impl Server {
    async fn start() -> Server {
        Server::start_with(Config::for_tests()).await
    }

    async fn start_with(config: Config) -> Server {
        Server(
            ServiceUnderTest::start(move |listener, shutdown| {
                draughts_validation::run(config, listener, shutdown)
            })
            .await,
        )
    }

    async fn channel(&self) -> Channel {
        self.0.channel().await
    }

    async fn client(&self) -> RulesClient<Channel> {
        RulesClient::new(self.channel().await)
    }

    async fn stop(self) {
        self.0.stop().await
    }
}

fn rules(v: pb::Variant) -> Option<pb::RuleSet> {
    Some(pb::RuleSet {
        variant: v as i32,
        options: None,
    })
}

fn text(t: &str) -> pb::MoveInput {
    pb::MoveInput {
        r#move: Some(pb::move_input::Move::Text(t.into())),
    }
}

#[tokio::test]
async fn list_moves_in_every_variant() {
    let server = Server::start().await;
    let mut c = server.client().await;
    for (v, n) in [
        (pb::Variant::International, 9),
        (pb::Variant::English, 7),
        (pb::Variant::Italian, 7),
        (pb::Variant::Russian, 7),
        (pb::Variant::Brazilian, 7),
        (pb::Variant::Spanish, 7),
        (pb::Variant::Czech, 7),
        (pb::Variant::Turkish, 8),
        (pb::Variant::Antidraughts, 9),
        (pb::Variant::Breakthrough, 9),
        (pb::Variant::Killer, 9),
        (pb::Variant::Pool, 7),
        (pb::Variant::Portuguese, 7),
        (pb::Variant::Frisian, 9),
        (pb::Variant::Frysk, 9),
        (pb::Variant::Canadian, 11),
    ] {
        let r = c
            .list_moves(pb::ListMovesRequest {
                rules: rules(v),
                fen: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.moves.len(), n, "{v:?}");
        assert!(!r.capture_available);
        assert_eq!(r.status.unwrap().outcome, pb::Outcome::Ongoing as i32);
    }
    // A capture with its path and captured squares, algebraic on the wire.
    let r = c
        .list_moves(pb::ListMovesRequest {
            rules: rules(pb::Variant::Russian),
            fen: "W:W22:B18,10".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.moves.len(), 1);
    let m = &r.moves[0];
    assert_eq!(m.notation, "c3:c7");
    assert_eq!(m.path, ["c3", "e5", "c7"]);
    assert_eq!(m.captured, ["d4", "d6"]);
    assert!(r.capture_available);
    server.stop().await;
}

#[tokio::test]
async fn validate_move_answers_legal_illegal_ambiguous_malformed() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let validate = |fen: &str, mv: pb::MoveInput| pb::ValidateMoveRequest {
        rules: rules(pb::Variant::English),
        fen: fen.into(),
        r#move: Some(mv),
        include_pieces: false,
    };
    let r = c
        .validate_move(validate("", text("11-15")))
        .await
        .unwrap()
        .into_inner();
    assert!(r.legal);
    assert_eq!(r.r#move.unwrap().notation, "11-15");
    let p = r.position.unwrap();
    assert_eq!(p.side_to_move, pb::Color::White as i32);
    assert!(p.pieces.is_empty(), "pieces only on request");
    assert_eq!(r.status.unwrap().outcome, pb::Outcome::Ongoing as i32);
    let mut with_pieces = validate("", text("11-15"));
    with_pieces.include_pieces = true;
    let r = c.validate_move(with_pieces).await.unwrap().into_inner();
    assert_eq!(r.position.unwrap().pieces.len(), 24);

    let r = c
        .validate_move(validate("", text("11-17")))
        .await
        .unwrap()
        .into_inner();
    assert!(!r.legal);
    assert_eq!(r.rejection, pb::MoveRejection::Illegal as i32);
    assert!(r.reason.contains("11-17"), "{}", r.reason);

    let r = c
        .validate_move(validate("", text("11-")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.rejection, pb::MoveRejection::Malformed as i32);

    let r = c
        .validate_move(validate("B:W14,15,22,23:B10", text("10x26")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.rejection, pb::MoveRejection::Ambiguous as i32);
    let mut cands = r.candidates.clone();
    cands.sort();
    assert_eq!(cands, ["10x17x26", "10x19x26"]);

    // Squares instead of text: the full path chooses one route; the last capture wins the game.
    let squares = pb::MoveInput {
        r#move: Some(pb::move_input::Move::Squares(pb::MoveSquares {
            squares: vec!["10".into(), "17".into(), "26".into()],
        })),
    };
    let r = c
        .validate_move(validate("B:W14,22:B10", squares))
        .await
        .unwrap()
        .into_inner();
    assert!(r.legal, "{}", r.reason);
    assert_eq!(r.r#move.as_ref().unwrap().captured.len(), 2);
    let st = r.status.unwrap();
    assert_eq!(st.outcome, pb::Outcome::BlackWins as i32);
    assert_eq!(st.reason, pb::EndReason::NoPieces as i32);
    server.stop().await;
}

#[tokio::test]
async fn apply_moves_stops_at_the_first_illegal_move() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let r = c
        .apply_moves(pb::ApplyMovesRequest {
            rules: rules(pb::Variant::International),
            fen: String::new(),
            moves: vec![text("32-28"), text("19-23"), text("28-22"), text("20-25")],
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.applied.len(), 2);
    assert_eq!(r.rejected_index, Some(2));
    assert_eq!(r.rejection, pb::MoveRejection::Illegal as i32);
    assert!(r.reason.contains("capture is mandatory"), "{}", r.reason);
    assert_eq!(r.position.unwrap().side_to_move, pb::Color::White as i32);

    // Repetition over the sequence is a draw, and a move after the end is refused.
    let kings = "W:WK50:BK1";
    let cycle = ["50-44", "1-6", "44-50", "6-1"];
    let moves: Vec<_> = cycle.iter().cycle().take(9).map(|m| text(m)).collect();
    let r = c
        .apply_moves(pb::ApplyMovesRequest {
            rules: rules(pb::Variant::International),
            fen: kings.into(),
            moves,
        })
        .await
        .unwrap()
        .into_inner();
    let st = r.status.unwrap();
    assert_eq!(st.outcome, pb::Outcome::Draw as i32, "{}", st.description);
    assert_eq!(st.reason, pb::EndReason::Repetition as i32);
    assert_eq!(r.applied.len(), 8);
    assert_eq!(r.rejected_index, Some(8));
    assert!(r.reason.contains("game is over"));
    server.stop().await;
}

/// docs/rules.md §7.2, §7.4-§7.6: the draw rules of a game are options of its rule set, applied by
/// ApplyMoves over the sequence.
#[tokio::test]
async fn draw_rule_options_change_when_the_game_is_drawn() {
    let server = Server::start().await;
    let mut c = server.client().await;
    // One king each (international): a repetition after 8 plies, the FMJD count (5 moves each) after 10.
    let cycle = ["50-44", "1-6", "44-50", "6-1"];
    let mut apply = async |options: pb::RuleOptions, n: usize| {
        let r = c
            .apply_moves(pb::ApplyMovesRequest {
                rules: Some(pb::RuleSet {
                    variant: pb::Variant::International as i32,
                    options: Some(options),
                }),
                fen: "W:WK50:BK1".into(),
                moves: cycle.iter().cycle().take(n).map(|m| text(m)).collect(),
            })
            .await
            .unwrap()
            .into_inner();
        let st = r.status.unwrap();
        (r.applied.len(), pb::EndReason::try_from(st.reason).unwrap())
    };
    assert_eq!(
        apply(pb::RuleOptions::default(), 20).await,
        (8, pb::EndReason::Repetition)
    );
    let no_repetition = pb::RuleOptions {
        repetition: Some(false),
        ..Default::default()
    };
    assert_eq!(
        apply(no_repetition, 20).await,
        (10, pb::EndReason::EndgameRule)
    );
    let kings_only = pb::RuleOptions {
        endgame_counts: Some(false),
        kings_only_limit: 6,
        ..no_repetition
    };
    assert_eq!(apply(kings_only, 20).await, (12, pb::EndReason::NoProgress));
    let none = pb::RuleOptions {
        kings_only_limit: 0,
        ..kings_only
    };
    // Without the kings-only count the variant's (25 moves each) applies.
    assert_eq!(apply(none, 60).await, (50, pb::EndReason::NoProgress));
    server.stop().await;
}

#[tokio::test]
async fn draw_rule_options_that_make_no_sense_are_refused() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let cases = [
        (
            pb::Variant::International,
            pb::RuleOptions {
                kings_only_limit: 1001,
                ..Default::default()
            },
            "kings_only_limit must be from 1 to 1000",
        ),
        (
            pb::Variant::International,
            pb::RuleOptions {
                kings_only_limit: 30,
                move_limit: 40,
                ..Default::default()
            },
            "give one of them",
        ),
        (
            pb::Variant::Breakthrough,
            pb::RuleOptions {
                kings_only_limit: 25,
                ..Default::default()
            },
            "'kings-only' does not apply to breakthrough",
        ),
        (
            pb::Variant::English,
            pb::RuleOptions {
                endgame_counts: Some(true),
                ..Default::default()
            },
            "'endgame-counts' does not apply to english",
        ),
        (
            pb::Variant::Turkish,
            pb::RuleOptions {
                repetition: Some(false),
                ..Default::default()
            },
            "repetition=off leaves turkish without a rule that ends a game",
        ),
    ];
    for (variant, options, needle) in cases {
        let e = c
            .start_position(pb::StartPositionRequest {
                rules: Some(pb::RuleSet {
                    variant: variant as i32,
                    options: Some(options),
                }),
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{needle}: {e:?}");
        assert!(
            e.message().contains(needle),
            "expected '{needle}' in '{}'",
            e.message()
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn start_and_parse_position() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let r = c
        .start_position(pb::StartPositionRequest {
            rules: rules(pb::Variant::English),
        })
        .await
        .unwrap()
        .into_inner();
    let p = r.position.unwrap();
    assert_eq!(p.side_to_move, pb::Color::Black as i32);
    assert_eq!(p.pieces.len(), 24);
    let r = c
        .parse_position(pb::ParsePositionRequest {
            rules: rules(pb::Variant::International),
            fen: " B:BK1-3:W50,K49:H0:F1 ".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let p = r.position.unwrap();
    assert_eq!(p.fen, "B:WK49,50:BK1,K2,K3");
    assert_eq!(p.pieces[0].square, "b10");
    assert_eq!(p.pieces[0].number, 1);
    assert_eq!(p.pieces[0].kind, pb::PieceKind::King as i32);
    server.stop().await;
}

#[tokio::test]
async fn bad_input_gets_invalid_argument_with_a_useful_message() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let cases: Vec<(pb::ListMovesRequest, &str)> = vec![
        (
            pb::ListMovesRequest {
                rules: None,
                fen: String::new(),
            },
            "rules are required",
        ),
        (
            pb::ListMovesRequest {
                rules: rules(pb::Variant::Unspecified),
                fen: String::new(),
            },
            "variant is required",
        ),
        (
            pb::ListMovesRequest {
                rules: Some(pb::RuleSet {
                    variant: 99,
                    options: None,
                }),
                fen: String::new(),
            },
            "unknown variant",
        ),
        (
            pb::ListMovesRequest {
                rules: rules(pb::Variant::English),
                fen: "X:W1".into(),
            },
            "malformed FEN",
        ),
        (
            pb::ListMovesRequest {
                rules: rules(pb::Variant::English),
                fen: "W:W33".into(),
            },
            "square 33 does not exist",
        ),
        (
            pb::ListMovesRequest {
                rules: rules(pb::Variant::English),
                fen: "W:W1".into(),
            },
            "promotion row",
        ),
        (
            pb::ListMovesRequest {
                rules: Some(pb::RuleSet {
                    variant: pb::Variant::International as i32,
                    options: Some(pb::RuleOptions {
                        no_mandatory_capture: true,
                        ..Default::default()
                    }),
                }),
                fen: String::new(),
            },
            "does not apply to international",
        ),
        (
            pb::ListMovesRequest {
                rules: Some(pb::RuleSet {
                    variant: pb::Variant::English as i32,
                    options: Some(pb::RuleOptions {
                        move_limit: 5000,
                        ..Default::default()
                    }),
                }),
                fen: String::new(),
            },
            "move_limit",
        ),
    ];
    for (req, needle) in cases {
        let e = c.list_moves(req).await.unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{needle}: {e:?}");
        assert!(
            e.message().contains(needle),
            "expected '{needle}' in '{}'",
            e.message()
        );
        assert!(
            !e.message().contains("Error {"),
            "no debug dumps: {}",
            e.message()
        );
    }
    let e = c
        .parse_position(pb::ParsePositionRequest {
            rules: rules(pb::Variant::English),
            fen: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let too_many = pb::ApplyMovesRequest {
        rules: rules(pb::Variant::English),
        fen: String::new(),
        moves: vec![text("11-15"); 2001],
    };
    let e = c.apply_moves(too_many).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    server.stop().await;
}

#[tokio::test]
async fn oversized_messages_are_refused() {
    let server = Server::start().await;
    let mut c = server.client().await;
    let e = c
        .list_moves(pb::ListMovesRequest {
            rules: rules(pb::Variant::English),
            fen: "W".repeat(100_000),
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange, "{e:?}");
    assert!(
        e.message().contains("message length too large"),
        "{}",
        e.message()
    );
    // The connection still works afterwards.
    c.start_position(pb::StartPositionRequest {
        rules: rules(pb::Variant::English),
    })
    .await
    .unwrap();
    server.stop().await;
}

#[tokio::test]
async fn health_reflection_and_echo_are_served() {
    let server = Server::start().await;
    let ch = server.channel().await;
    let mut health = tonic_health::pb::health_client::HealthClient::new(ch.clone());
    for service in ["", "draughts.v1.Rules", "draughts.v1.Diagnostics"] {
        let r = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            r.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
            "{service}"
        );
    }

    use tonic_reflection::pb::v1 as r1;
    let mut refl = r1::server_reflection_client::ServerReflectionClient::new(ch.clone());
    let req = r1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(r1::server_reflection_request::MessageRequest::ListServices(
            String::new(),
        )),
    };
    let mut stream = refl
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let resp = stream.message().await.unwrap().unwrap();
    let names: Vec<String> = match resp.message_response.unwrap() {
        r1::server_reflection_response::MessageResponse::ListServicesResponse(l) => {
            l.service.into_iter().map(|s| s.name).collect()
        }
        other => panic!("{other:?}"),
    };
    assert!(
        names.contains(&"draughts.v1.Rules".to_string()),
        "{names:?}"
    );

    use tonic_reflection::pb::v1alpha as ra;
    let mut refl = ra::server_reflection_client::ServerReflectionClient::new(ch.clone());
    let req = ra::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            ra::server_reflection_request::MessageRequest::FileContainingSymbol(
                "draughts.v1.Rules".into(),
            ),
        ),
    };
    let mut stream = refl
        .server_reflection_info(tokio_stream::iter(vec![req]))
        .await
        .unwrap()
        .into_inner();
    let resp = stream.message().await.unwrap().unwrap();
    assert!(matches!(
        resp.message_response,
        Some(ra::server_reflection_response::MessageResponse::FileDescriptorResponse(_))
    ));

    let mut echo = pb::diagnostics_client::DiagnosticsClient::new(ch);
    let r = echo
        .echo(pb::EchoRequest {
            payload: b"ping".to_vec(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.payload, b"ping");
    server.stop().await;
}

/// A gRPC-Web call as a browser on `origin` makes it (HTTP/1.1 POST, `application/grpc-web+proto`);
/// the whole response, lowercased.
async fn grpc_web_call(server: &Server, origin: &str) -> String {
    use prost::Message;
    let msg = pb::StartPositionRequest {
        rules: rules(pb::Variant::English),
    }
    .encode_to_vec();
    let mut body = vec![0u8];
    body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    body.extend_from_slice(&msg);
    let head = format!(
        "POST /draughts.v1.Rules/StartPosition HTTP/1.1\r\nHost: {}\r\nContent-Type: application/grpc-web+proto\r\nX-Grpc-Web: 1\r\nOrigin: {origin}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        server.0.addr(),
        body.len()
    );
    let mut tcp = tokio::net::TcpStream::connect(server.0.addr())
        .await
        .unwrap();
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(&body).await.unwrap();
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).await.unwrap();
    String::from_utf8_lossy(&raw).to_lowercase()
}

/// gRPC-Web over HTTP/1.1 from a configured origin: answered, with CORS for that origin only and
/// without credentials.
#[tokio::test]
async fn grpc_web_over_http1_with_cors() {
    let mut config = Config::for_tests();
    config.server.cors_origins = vec!["http://example.test".into()];
    let server = Server::start_with(config).await;
    let text = grpc_web_call(&server, "http://example.test").await;
    assert!(text.starts_with("http/1.1 200"), "{text}");
    assert!(
        text.contains("content-type: application/grpc-web+proto"),
        "{text}"
    );
    assert!(
        text.contains("access-control-allow-origin: http://example.test"),
        "{text}"
    );
    assert!(text.contains("access-control-expose-headers"), "{text}");
    // ... among them the refusal's reason, which a page words itself.
    assert!(text.contains(draughts_proto::REASON_TRAILER), "{text}");
    assert!(!text.contains("access-control-allow-credentials"), "{text}");
    // The trailer frame carries grpc-status:0.
    assert!(text.contains("grpc-status:0"), "{text}");
    // Another origin gets no CORS answer (its browser will not hand the response to the page).
    let text = grpc_web_call(&server, "http://evil.test").await;
    assert!(!text.contains("access-control-allow-origin"), "{text}");
    server.stop().await;
}

/// The default allows no origin: an arbitrary Origin is never mirrored (it was, with credentials).
#[tokio::test]
async fn cors_allows_no_origin_by_default() {
    let server = Server::start().await;
    let text = grpc_web_call(&server, "http://evil.test").await;
    assert!(text.starts_with("http/1.1 200"), "{text}");
    assert!(!text.contains("access-control-allow-origin"), "{text}");
    assert!(!text.contains("access-control-allow-credentials"), "{text}");
    server.stop().await;
}

#[tokio::test]
async fn shutdown_drains_and_stops() {
    let server = Server::start().await;
    let mut c = server.client().await;
    c.start_position(pb::StartPositionRequest {
        rules: rules(pb::Variant::English),
    })
    .await
    .unwrap();
    let addr = server.0.addr();
    server.stop().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
