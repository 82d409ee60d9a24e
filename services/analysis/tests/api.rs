//! `draughts.v1.Analysis` through a real server on 127.0.0.1:0 (embedded backend, in-process worker):
//! who may call what, quotas, limits, watching progress to the result, game analysis from PDN, cancel.

use std::time::Duration;

use draughts_analysis::Config;
use draughts_proto::pb;
use draughts_proto::pb::analysis_client::AnalysisClient;
use draughts_testkit::ServiceUnderTest;
use futures_util::StreamExt;
use tonic::transport::Channel;

fn player_token(sub: &str) -> String {
    let secret = draughts_auth::AuthConfig::for_tests().jwt_key.unwrap();
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 600;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &serde_json::json!({"sub": sub, "exp": exp}),
        &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()).unwrap(),
    )
    .unwrap()
}

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

async fn start(config: Config) -> (ServiceUnderTest, AnalysisClient<Channel>) {
    let server = ServiceUnderTest::start(move |listener, shutdown| {
        draughts_analysis::run(config, listener, shutdown)
    })
    .await;
    let client = AnalysisClient::new(server.channel().await);
    (server, client)
}

fn english(moves: &[&str]) -> pb::PositionInput {
    pb::PositionInput {
        rules: Some(pb::RuleSet {
            variant: pb::Variant::English as i32,
            options: None,
        }),
        fen: String::new(),
        moves: moves
            .iter()
            .map(|m| pb::MoveInput {
                r#move: Some(pb::move_input::Move::Text(m.to_string())),
            })
            .collect(),
    }
}

fn limits(depth: u32, movetime_ms: u64) -> Option<pb::SearchLimits> {
    Some(pb::SearchLimits {
        depth,
        nodes: 0,
        movetime_ms,
        multi_pv: 2,
    })
}

fn analyze(moves: &[&str], l: Option<pb::SearchLimits>) -> pb::AnalyzePositionRequest {
    pb::AnalyzePositionRequest {
        source: Some(pb::analyze_position_request::Source::Position(english(
            moves,
        ))),
        limits: l,
    }
}

/// A refusal for a used-up daily quota: RESOURCE_EXHAUSTED, saying so, with `retry-after` (whole
/// seconds to the next UTC midnight).
#[track_caller]
fn assert_over_daily_quota(over: &tonic::Status) {
    assert_eq!(over.code(), tonic::Code::ResourceExhausted, "{over:?}");
    assert!(over.message().contains("daily quota"), "{}", over.message());
    let retry: u64 = over
        .metadata()
        .get("retry-after")
        .expect("retry-after metadata")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&retry), "{retry}");
}

fn best_move(level: u32) -> pb::BestMoveRequest {
    pb::BestMoveRequest {
        source: Some(pb::best_move_request::Source::Position(english(&["11-15"]))),
        strength: Some(pb::best_move_request::Strength::Level(level)),
        clock: None,
        seed: 1,
    }
}

/// Watches a job to its end; returns the updates.
async fn watch(
    client: &mut AnalysisClient<Channel>,
    token: &str,
    job_id: &str,
) -> Vec<pb::AnalysisUpdate> {
    let mut stream = client
        .watch_analysis(authed(
            token,
            pb::AnalysisJobRequest {
                job_id: job_id.into(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let mut updates = Vec::new();
    while let Some(update) = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("an update within 30 s")
    {
        updates.push(update.unwrap());
    }
    updates
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn who_may_call_what() {
    let (server, mut client) = start(Config::for_tests()).await;
    // Anonymous: only QueueStatus.
    let anonymous = client
        .analyze_position(analyze(&[], limits(3, 0)))
        .await
        .unwrap_err();
    assert_eq!(anonymous.code(), tonic::Code::Unauthenticated);
    let status = client
        .queue_status(pb::QueueStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(status.classes.len(), 4);
    // Guests: BestMove at low levels, no analysis jobs.
    let guest = guest_token().await;
    let denied = client
        .analyze_position(authed(&guest, analyze(&[], limits(3, 0))))
        .await
        .unwrap_err();
    assert_eq!(denied.code(), tonic::Code::PermissionDenied, "{denied:?}");
    let too_strong = client
        .best_move(authed(&guest, best_move(7)))
        .await
        .unwrap_err();
    assert_eq!(too_strong.code(), tonic::Code::InvalidArgument);
    assert!(
        too_strong.message().contains("1 to 6"),
        "{}",
        too_strong.message()
    );
    let answer = client
        .best_move(authed(&guest, best_move(2)))
        .await
        .unwrap()
        .into_inner();
    assert!(answer.r#move.is_some());
    assert_eq!(answer.depth, 2);
    // Same seed, same position, same level: the same move.
    let again = client
        .best_move(authed(&guest, best_move(2)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.r#move, answer.r#move);
    // A position with no move to choose.
    let mut over = best_move(1);
    over.source = Some(pb::best_move_request::Source::Position(pb::PositionInput {
        fen: "W:W:B1".into(),
        ..english(&[])
    }));
    let err = client.best_move(authed(&guest, over)).await.unwrap_err();
    assert!(
        matches!(
            err.code(),
            tonic::Code::FailedPrecondition | tonic::Code::InvalidArgument
        ),
        "{err:?}"
    );
    // A player: limits over the caps are refused, naming the field.
    let ann = player_token("ann");
    let over_cap = client
        .analyze_position(authed(&ann, analyze(&[], limits(41, 0))))
        .await
        .unwrap_err();
    assert_eq!(over_cap.code(), tonic::Code::InvalidArgument);
    assert!(
        over_cap.message().contains("limits.depth"),
        "{}",
        over_cap.message()
    );
    let no_limits = client
        .analyze_position(authed(&ann, analyze(&[], limits(0, 0))))
        .await
        .unwrap_err();
    assert_eq!(no_limits.code(), tonic::Code::InvalidArgument);
    let illegal = client
        .analyze_position(authed(&ann, analyze(&["11-15", "11-15"], limits(3, 0))))
        .await
        .unwrap_err();
    assert_eq!(illegal.code(), tonic::Code::FailedPrecondition);
    assert!(
        illegal.message().contains("moves[1]"),
        "{}",
        illegal.message()
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_position_is_watched_to_its_result_by_its_owner_only() {
    let (server, mut client) = start(Config::for_tests()).await;
    let ann = player_token("ann");
    // Stopped by its 300 ms (progress is written once a job has run 50 ms): its progress is seen.
    let job = client
        .analyze_position(authed(&ann, analyze(&["11-15", "23-19"], limits(40, 300))))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(job.job_id.len(), 32);
    let updates = watch(&mut client, &ann, &job.job_id).await;
    let progress = updates
        .iter()
        .filter(|u| matches!(u.kind, Some(pb::analysis_update::Kind::Progress(_))))
        .count();
    assert!(progress >= 1, "progress while searching: {updates:?}");
    let Some(pb::analysis_update::Kind::Finished(view)) = &updates.last().unwrap().kind else {
        panic!("the stream ends with the final view");
    };
    assert_eq!(view.state, pb::JobState::Done as i32);
    let Some(pb::analysis_view::Result::Position(result)) = &view.result else {
        panic!("a position result");
    };
    assert!(
        (4..40).contains(&result.depth),
        "stopped on time: {}",
        result.depth
    );
    assert_eq!(result.lines.len(), 2, "multi-PV 2");
    assert!(!result.lines[0].pv.is_empty());
    // Not bob's job: NOT_FOUND, for reading and cancelling alike.
    let bob = player_token("bob");
    let foreign = client
        .get_analysis(authed(
            &bob,
            pb::AnalysisJobRequest {
                job_id: job.job_id.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(foreign.code(), tonic::Code::NotFound);
    let foreign_cancel = client
        .cancel_analysis(authed(
            &bob,
            pb::AnalysisJobRequest {
                job_id: job.job_id.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(foreign_cancel.code(), tonic::Code::NotFound);
    // The same request again: from the cache, at once.
    let cached = client
        .analyze_position(authed(&bob, analyze(&["11-15", "23-19"], limits(40, 300))))
        .await
        .unwrap()
        .into_inner();
    assert!(cached.cached);
    assert_eq!(cached.state, pb::JobState::Done as i32);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_interactive_job_at_a_time_and_a_daily_quota() {
    let mut config = Config::for_tests();
    config.analysis.quotas.jobs_per_day_player = 3;
    let (server, mut client) = start(config).await;
    let ann = player_token("ann");
    let long = client
        .analyze_position(authed(&ann, analyze(&[], limits(0, 20_000))))
        .await
        .unwrap()
        .into_inner();
    let busy = client
        .analyze_position(authed(&ann, analyze(&["9-13"], limits(3, 0))))
        .await
        .unwrap_err();
    assert_eq!(busy.code(), tonic::Code::ResourceExhausted);
    assert!(busy.metadata().get("retry-after").is_some());
    // Cancel frees the slot.
    let cancelled = client
        .cancel_analysis(authed(
            &ann,
            pb::AnalysisJobRequest {
                job_id: long.job_id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cancelled.state, pb::JobState::Cancelled as i32);
    let third = client
        .analyze_position(authed(&ann, analyze(&["9-13"], limits(3, 0))))
        .await
        .unwrap()
        .into_inner();
    watch(&mut client, &ann, &third.job_id).await;
    // Three jobs counted today (the refused one too): the fourth is over the quota.
    let over = client
        .analyze_position(authed(&ann, analyze(&["9-14"], limits(3, 0))))
        .await
        .unwrap_err();
    assert_over_daily_quota(&over);
    server.stop().await;
}

/// BestMove's daily quota (counted alongside the job's submission): the calls within it are
/// answered, the next one is RESOURCE_EXHAUSTED with when to retry, and its job never answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn best_moves_have_a_daily_quota() {
    let mut config = Config::for_tests();
    config.analysis.quotas.best_moves_per_day_guest = 2;
    let (server, mut client) = start(config).await;
    let guest = guest_token().await;
    for _ in 0..2 {
        let answer = client
            .best_move(authed(&guest, best_move(1)))
            .await
            .unwrap()
            .into_inner();
        assert!(answer.r#move.is_some(), "{answer:?}");
    }
    let over = client
        .best_move(authed(&guest, best_move(1)))
        .await
        .unwrap_err();
    assert_over_daily_quota(&over);
    // Another player's quota is their own.
    let other = guest_token().await;
    client
        .best_move(authed(&other, best_move(1)))
        .await
        .unwrap();
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pdn_game_streams_ply_by_ply_with_judgements() {
    let (server, mut client) = start(Config::for_tests()).await;
    let ann = player_token("ann");
    // Eight plies: the last legal move each time (captures included when forced).
    let mut pos = draughts_engine::Position::start(draughts_engine::Variant::English);
    let mut texts = Vec::new();
    for _ in 0..8 {
        let mv = *pos.legal_moves().last().unwrap();
        texts.push(pos.move_to_text(&mv));
        pos = pos.play_unchecked(&mv);
    }
    let pdn = format!(
        "[GameType \"21\"]\n1. {} {{a comment}} {} 2. {} *",
        texts[0],
        texts[1],
        texts[2..].join(" ")
    );
    let job = client
        .analyze_game(authed(
            &ann,
            pb::AnalyzeGameRequest {
                source: Some(pb::analyze_game_request::Source::Pdn(pdn.clone())),
                // 50 ms a ply (no depth limit): the job runs for about 0.4 s, well past the
                // moment the watch below attaches, so its progress is seen ply by ply.
                limits_per_ply: limits(0, 50),
                rules: None,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let updates = watch(&mut client, &ann, &job.job_id).await;
    let mut streamed = Vec::new();
    for update in &updates {
        if let Some(pb::analysis_update::Kind::Progress(p)) = &update.kind {
            assert_eq!(p.plies_total, 8);
            streamed.extend(p.plies.iter().map(|ply| ply.ply));
        }
    }
    assert!(!streamed.is_empty());
    assert!(
        streamed.windows(2).all(|w| w[1] == w[0] + 1),
        "plies streamed once, in order: {streamed:?}"
    );
    let Some(pb::analysis_update::Kind::Finished(view)) = &updates.last().unwrap().kind else {
        panic!("final view");
    };
    let Some(pb::analysis_view::Result::Game(game)) = &view.result else {
        panic!("a game result: {view:?}");
    };
    assert_eq!(game.plies.len(), 8);
    assert_eq!(game.plies[5].played.as_ref().unwrap().notation, texts[5]);
    assert!(
        game.plies
            .iter()
            .all(|p| p.best.is_some() && p.score_before.is_some())
    );
    assert_eq!(game.summary.len(), 2);
    assert_eq!(game.summary[0].moves + game.summary[1].moves, 8);
    // Bad PDN: the ply is named.
    let bad = client
        .analyze_game(authed(
            &ann,
            pb::AnalyzeGameRequest {
                source: Some(pb::analyze_game_request::Source::Pdn(
                    "[GameType \"21\"] 1. 11-15 11-15".into(),
                )),
                limits_per_ply: limits(3, 0),
                rules: None,
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(bad.code(), tonic::Code::FailedPrecondition);
    assert!(bad.message().contains("ply 2"), "{}", bad.message());
    // A malformed game id is INVALID_ARGUMENT (checked before any call to Games), as a position
    // from a game is.
    for bad in ["g\0", "g 1", ""] {
        let malformed = client
            .analyze_game(authed(
                &ann,
                pb::AnalyzeGameRequest {
                    source: Some(pb::analyze_game_request::Source::GameId(bad.into())),
                    limits_per_ply: limits(3, 0),
                    rules: None,
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(
            malformed.code(),
            tonic::Code::InvalidArgument,
            "{bad:?}: {malformed:?}"
        );
        assert!(!malformed.message().contains('\0'));
    }
    // No Games address configured: game ids are refused with a reason.
    let no_games = client
        .analyze_game(authed(
            &ann,
            pb::AnalyzeGameRequest {
                source: Some(pb::analyze_game_request::Source::GameId("g1".into())),
                limits_per_ply: limits(3, 0),
                rules: None,
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(no_games.code(), tonic::Code::FailedPrecondition);
    server.stop().await;
}

/// Guests' BestMoves wait in their own class and are bounded in flight per guest and per client
/// address; a call's place is freed when it is answered (here: when it times out, as no worker
/// runs, which keeps each call in flight for a known time).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn guests_best_moves_are_bounded_in_flight() {
    let mut config = Config::for_tests();
    config.in_process_workers = false;
    config.analysis.analysis_best_move_timeout_ms = 1_500;
    config.analysis.quotas.guest_best_moves_in_flight = 1;
    config
        .analysis
        .quotas
        .guest_best_moves_in_flight_per_address = 2;
    let (server, client) = start(config).await;
    let (ann, bob, carl) = (
        guest_token().await,
        guest_token().await,
        guest_token().await,
    );
    let in_flight = |token: String| {
        let mut client = client.clone();
        tokio::spawn(async move { client.best_move(authed(&token, best_move(1))).await })
    };
    let ann_first = in_flight(ann.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The call waits in the guest class (no worker here), not with the computer's moves.
    let status = client
        .clone()
        .queue_status(pb::QueueStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    let queued = |class: pb::JobClass| {
        status
            .classes
            .iter()
            .find(|c| c.class == class as i32)
            .map_or(0, |c| c.queued)
    };
    assert_eq!(queued(pb::JobClass::Guest), 1, "{status:?}");
    assert_eq!(queued(pb::JobClass::ComputerMove), 0, "{status:?}");
    // Ann has her one call in flight.
    let refused = client
        .clone()
        .best_move(authed(&ann, best_move(1)))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("in flight"),
        "{}",
        refused.message()
    );
    assert!(refused.metadata().get("retry-after").is_some());
    // Bob, from the same address: the address's second call.
    let bob_first = in_flight(bob.clone());
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Carl, from that address too: its two calls are in flight.
    let refused = client
        .clone()
        .best_move(authed(&carl, best_move(1)))
        .await
        .unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("address"),
        "{}",
        refused.message()
    );
    // Answered (DEADLINE_EXCEEDED: nobody searched), the places are free again.
    for call in [ann_first, bob_first] {
        let answer = call.await.unwrap().unwrap_err();
        assert_eq!(answer.code(), tonic::Code::DeadlineExceeded, "{answer:?}");
    }
    let answer = client
        .clone()
        .best_move(authed(&carl, best_move(1)))
        .await
        .unwrap_err();
    assert_eq!(
        answer.code(),
        tonic::Code::DeadlineExceeded,
        "admitted: {answer:?}"
    );
    server.stop().await;
}

/// WatchAnalysis streams are bounded per caller on a replica: past the cap RESOURCE_EXHAUSTED with
/// `retry-after`; a closed stream frees its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watch_streams_per_caller_are_capped() {
    let mut config = Config::for_tests();
    config.analysis.analysis_max_watches_per_caller = 3;
    let (server, mut client) = start(config).await;
    let ann = player_token("ann");
    // A long search, so the job stays open while it is watched.
    let job = client
        .analyze_position(authed(&ann, analyze(&[], limits(0, 20_000))))
        .await
        .unwrap()
        .into_inner();
    let request = || {
        authed(
            &ann,
            pb::AnalysisJobRequest {
                job_id: job.job_id.clone(),
            },
        )
    };
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(client.watch_analysis(request()).await.unwrap().into_inner());
    }
    let refused = client.watch_analysis(request()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
    assert!(refused.metadata().get("retry-after").is_some());
    assert!(
        refused.message().contains("analysis watches"),
        "{}",
        refused.message()
    );
    // Closing one frees its place (the server notices the closed stream).
    open.pop();
    let start = std::time::Instant::now();
    let reopened = loop {
        match client.watch_analysis(request()).await {
            Ok(stream) => break stream,
            Err(e) => assert_eq!(e.code(), tonic::Code::ResourceExhausted),
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the place was never freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    drop(reopened);
    client.cancel_analysis(request()).await.unwrap();
    server.stop().await;
}

/// The workers probe the endgame tables of `--analysis-bitbases`: in english, two kings against a king
/// and a man, whose forced capture leaves an ending the tables call won, score as a table win
/// (`BITBASE_WIN` and up) at depth 1, where the same search without tables sees only its evaluation.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_probe_the_endgame_tables_they_are_given() {
    use draughts_ai::bitbase::{self, Value};
    use draughts_engine::{Position, Variant};
    let fen = "W:WK11,K5:BK30,15";
    let tables = bitbase::build(Variant::English, 3, |_| {}).unwrap();
    let after = Position::from_fen(Variant::English, "B:WK5,K18:BK30").unwrap();
    assert_eq!(
        tables.probe(&after),
        Some(Value::Loss),
        "black, after 11x18"
    );
    let tmp = tempfile::Builder::new()
        .prefix("draughts-analysis-bb-")
        .tempdir()
        .unwrap();
    let dir = tmp.path().to_path_buf();
    tables.write_dir(&dir).unwrap();

    let request = pb::AnalyzePositionRequest {
        source: Some(pb::analyze_position_request::Source::Position(
            pb::PositionInput {
                fen: fen.into(),
                moves: Vec::new(),
                ..english(&[])
            },
        )),
        limits: limits(1, 0),
    };
    let mut scores = Vec::new();
    for with_tables in [true, false] {
        let mut config = Config::for_tests();
        config.workers.analysis_bitbases = with_tables.then(|| dir.clone());
        let (server, mut client) = start(config).await;
        let ann = player_token("ann");
        let job = client
            .analyze_position(authed(&ann, request.clone()))
            .await
            .unwrap()
            .into_inner();
        let updates = watch(&mut client, &ann, &job.job_id).await;
        let Some(pb::analysis_update::Kind::Finished(view)) = &updates.last().unwrap().kind else {
            panic!("the stream ends with the final view");
        };
        let Some(pb::analysis_view::Result::Position(result)) = &view.result else {
            panic!("a position result: {view:?}");
        };
        let score = result.lines[0].score.and_then(|s| s.kind);
        scores.push(score);
        server.stop().await;
    }
    // Removed: the background build below starts from nothing there.
    std::fs::remove_dir_all(&dir).unwrap();
    // A table win scores BITBASE_WIN plus the evaluation, clamped to 2,000 either way.
    let won = draughts_ai::search::BITBASE_WIN - 2_000;
    assert!(
        matches!(scores[0], Some(pb::score::Kind::CentiMen(cm)) if cm >= won),
        "with the tables: {:?}",
        scores[0]
    );
    assert!(
        matches!(scores[1], Some(pb::score::Kind::CentiMen(cm)) if cm < 2_000),
        "without: {:?}",
        scores[1]
    );

    // A directory that does not exist is no tables (a warning), never a failed start; with a build
    // plan the tables are made there in the background and the workers take them once built.
    let mut config = Config::for_tests();
    config.workers.analysis_bitbases = Some(dir.join("missing"));
    let worker = config.workers.worker().unwrap();
    assert!(worker.bitbases.current().is_none());
    config.workers.analysis_bitbases = Some(dir.clone());
    config.workers.analysis_bitbases_build = "english:3".into();
    let worker = config.workers.worker().unwrap();
    assert!(worker.bitbases.current().is_none(), "nothing there yet");
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    let shelf = loop {
        if let Some(shelf) = worker.bitbases.current() {
            break shelf;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the background build never finished"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(shelf.summary(), [(Variant::English, 3)]);
    assert_eq!(
        shelf.get(Variant::English).unwrap().probe(&after),
        Some(Value::Loss),
        "the built tables are the same tables"
    );
    // A second start finds them and builds nothing; a bad plan is refused with the setting's name.
    let again = config.workers.worker().unwrap();
    assert_eq!(
        again.bitbases.current().unwrap().summary(),
        [(Variant::English, 3)]
    );
    config.workers.analysis_bitbases_build = "english:3,chess:4".into();
    let err = config.workers.worker().unwrap_err();
    assert!(err.to_string().contains("analysis-bitbases-build"), "{err}");
}
