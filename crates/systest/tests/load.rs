//! The load test (issue 15, point 6), opt-in: `DRAUGHTS_LOAD=1 cargo test --release -p draughts-systest
//! --test load -- --nocapture` (`DRAUGHTS_LOAD_SECS`, default 600). The whole platform as separate
//! processes (as in the system test: two replicas of each service, three workers, Redis, PostgreSQL)
//! under sustained traffic on every public RPC from concurrent clients: Rules, Auth, games against the
//! computer and between people (invitations, moves, draws, resignations, PGN export, spectators),
//! quick pairing and the lobby, ratings and leaderboards, analysis jobs and computer moves. Prints, per
//! RPC, calls, calls per second, p50/p99 latency and errors; and each process's resident memory at the
//! start, after the warm-up (the first tenth of the run, at least 30 s), at the end and its highest
//! after the warm-up. Abusers run beside (guests flooding BestMove beyond their bound, churning games
//! against `ai:8` and lobby seeks): their refusals are expected, an honest call refused fails the test.
//! Fails if any process grew by more than 10% after the warm-up, or if more than 1%
//! of any RPC's calls failed.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use draughts_proto::pb;
use draughts_systest::{Platform, Replicas, Scale, authed, player_token};
use hdrhistogram::Histogram;
use pb::analysis_client::AnalysisClient;
use pb::auth_client::AuthClient;
use pb::games_client::GamesClient;
use pb::matchmaking_client::MatchmakingClient;
use pb::ratings_client::RatingsClient;
use pb::rules_client::RulesClient;
use tonic::{Code, Status};

#[derive(Debug, Default)]
struct Stats {
    per: Mutex<BTreeMap<&'static str, (Histogram<u64>, u64)>>,
    /// Honest calls (every name not starting with `abuse:`) refused with RESOURCE_EXHAUSTED.
    honest_refusals: std::sync::atomic::AtomicU64,
}

impl Stats {
    /// Runs `call`, recording its latency (microseconds) and whether it failed with an error other
    /// than `expected`.
    async fn time<T>(
        &self,
        name: &'static str,
        expected: &[Code],
        call: impl Future<Output = Result<T, Status>>,
    ) -> Result<T, Status> {
        let started = Instant::now();
        let result = call.await;
        let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let mut per = self.per.lock().unwrap();
        let entry = per
            .entry(name)
            .or_insert_with(|| (Histogram::new_with_bounds(1, 600_000_000, 3).unwrap(), 0));
        let _ = entry.0.record(us.max(1));
        if let Err(e) = &result
            && e.code() == Code::ResourceExhausted
            && !name.starts_with("abuse:")
        {
            self.honest_refusals.fetch_add(1, Ordering::Relaxed);
        }
        if let Err(e) = &result
            && !expected.contains(&e.code())
        {
            entry.1 += 1;
            if entry.1 <= 3 {
                eprintln!("{name}: {e}");
            }
        }
        result
    }
}

#[derive(Clone, Debug)]
struct Load {
    games: Replicas,
    analysis: Replicas,
    ratings: Replicas,
    matchmaking: Replicas,
    stats: Arc<Stats>,
    until: Instant,
    turn: Arc<AtomicUsize>,
}

const VARIANTS: [pb::Variant; 4] = [
    pb::Variant::International,
    pb::Variant::English,
    pb::Variant::Russian,
    pb::Variant::Turkish,
];

fn rules(v: pb::Variant) -> Option<pb::RuleSet> {
    Some(pb::RuleSet {
        variant: v as i32,
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

fn text(m: &str) -> Option<pb::MoveInput> {
    Some(pb::MoveInput {
        r#move: Some(pb::move_input::Move::Text(m.to_owned())),
    })
}

impl Load {
    fn next(&self) -> usize {
        self.turn.fetch_add(1, Ordering::Relaxed)
    }
    fn going(&self) -> bool {
        Instant::now() < self.until
    }
    fn g(&self) -> GamesClient<tonic::transport::Channel> {
        GamesClient::new(self.games.channel(self.next()))
    }

    async fn guest(&self, name: &str) -> Option<(String, String)> {
        let ch = self.games.channel(self.next());
        let r = self
            .stats
            .time(
                "Auth.CreateGuest",
                &[],
                AuthClient::new(ch.clone()).create_guest(pb::CreateGuestRequest {
                    display_name: name.into(),
                }),
            )
            .await
            .ok()?
            .into_inner();
        let _ = self
            .stats
            .time(
                "Auth.WhoAmI",
                &[],
                AuthClient::new(ch).who_am_i(authed(&r.token, pb::WhoAmIRequest {})),
            )
            .await;
        Some((r.player?.id, r.token))
    }

    /// The first legal move of a game's position (Rules.ListMoves), if any.
    async fn first_move(&self, game: &pb::GameView) -> Option<String> {
        let fen = game.position.as_ref()?.fen.clone();
        let r = self
            .stats
            .time(
                "Rules.ListMoves",
                &[],
                RulesClient::new(self.games.channel(self.next())).list_moves(
                    pb::ListMovesRequest {
                        rules: game.rules,
                        fen,
                    },
                ),
            )
            .await
            .ok()?
            .into_inner();
        r.moves.first().map(|m| m.notation.clone())
    }

    async fn get(&self, id: &str) -> Option<pb::GameView> {
        self.stats
            .time(
                "Games.GetGame",
                &[],
                self.g().get_game(pb::GetGameRequest {
                    game_id: id.to_owned(),
                }),
            )
            .await
            .ok()
            .map(tonic::Response::into_inner)
    }

    /// Plays `plies` moves of a game between two people (each side's first legal move).
    async fn play_people(&self, id: &str, white: &str, black: &str, plies: usize) -> Option<()> {
        for _ in 0..plies {
            let game = self.get(id).await?;
            if game.status.as_ref()?.outcome != pb::Outcome::Ongoing as i32 {
                return Some(());
            }
            let token = if game.position.as_ref()?.side_to_move == pb::Color::White as i32 {
                white
            } else {
                black
            };
            let mv = self.first_move(&game).await?;
            self.stats
                .time(
                    "Games.PlayMove",
                    &[Code::FailedPrecondition, Code::Aborted],
                    self.g().play_move(authed(
                        token,
                        pb::PlayMoveRequest {
                            game_id: id.to_owned(),
                            r#move: text(&mv),
                            expected_ply: Some(u32::try_from(game.moves.len()).ok()?),
                        },
                    )),
                )
                .await
                .ok()?;
        }
        Some(())
    }

    fn action(&self, id: &str) -> pb::GameActionRequest {
        pb::GameActionRequest {
            game_id: id.to_owned(),
        }
    }
}

async fn rules_traffic(load: Load) {
    let mut i = 0usize;
    while load.going() {
        i += 1;
        let v = VARIANTS[i % VARIANTS.len()];
        let ch = load.games.channel(load.next());
        let start = load
            .stats
            .time(
                "Rules.StartPosition",
                &[],
                RulesClient::new(ch.clone())
                    .start_position(pb::StartPositionRequest { rules: rules(v) }),
            )
            .await;
        let Ok(start) = start else { continue };
        let fen = start
            .into_inner()
            .position
            .map(|p| p.fen)
            .unwrap_or_default();
        let moves = load
            .stats
            .time(
                "Rules.ListMoves",
                &[],
                RulesClient::new(ch.clone()).list_moves(pb::ListMovesRequest {
                    rules: rules(v),
                    fen: fen.clone(),
                }),
            )
            .await;
        let Some(first) = moves
            .ok()
            .and_then(|m| m.into_inner().moves.first().map(|m| m.notation.clone()))
        else {
            continue;
        };
        let _ = load
            .stats
            .time(
                "Rules.ValidateMove",
                &[],
                RulesClient::new(ch.clone()).validate_move(pb::ValidateMoveRequest {
                    rules: rules(v),
                    fen: fen.clone(),
                    r#move: text(&first),
                    include_pieces: false,
                }),
            )
            .await;
        let _ = load
            .stats
            .time(
                "Rules.ApplyMoves",
                &[],
                RulesClient::new(ch.clone()).apply_moves(pb::ApplyMovesRequest {
                    rules: rules(v),
                    fen: fen.clone(),
                    moves: vec![text(&first).unwrap()],
                }),
            )
            .await;
        let _ = load
            .stats
            .time(
                "Rules.ParsePosition",
                &[],
                RulesClient::new(ch).parse_position(pb::ParsePositionRequest {
                    rules: rules(v),
                    fen,
                }),
            )
            .await;
    }
}

/// A signed-in player against `ai:1`: a few moves by BestMove, the PDN, a resignation, the list.
async fn computer_traffic(load: Load, k: usize) {
    let mut round = 0;
    while load.going() {
        round += 1;
        let sub = format!("load-ai-{k}-{}", round % 4);
        let me = format!("player:{sub}");
        let token = player_token(&sub, "Load");
        let created = load
            .stats
            .time(
                "Games.CreateGame",
                &[],
                load.g().create_game(authed(
                    &token,
                    pb::CreateGameRequest {
                        rules: rules(pb::Variant::English),
                        time_control: blitz(),
                        white: Some(pb::Player {
                            id: me.clone(),
                            ..pb::Player::default()
                        }),
                        black: Some(pb::Player {
                            id: "ai:1".into(),
                            ..pb::Player::default()
                        }),
                        rated: false,
                        fen: String::new(),
                        game_id: String::new(),
                        berserk_allowed: false,
                    },
                )),
            )
            .await;
        let Ok(created) = created else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let id = created.into_inner().game_id;
        let mut mine = 0;
        let started = Instant::now();
        while mine < 6 && load.going() && started.elapsed() < Duration::from_secs(30) {
            let Some(game) = load.get(&id).await else {
                break;
            };
            if game
                .status
                .as_ref()
                .is_some_and(|s| s.outcome != pb::Outcome::Ongoing as i32)
            {
                break;
            }
            if game.position.as_ref().map(|p| p.side_to_move) != Some(pb::Color::White as i32) {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            let best = load
                .stats
                .time(
                    "Analysis.BestMove",
                    &[Code::FailedPrecondition, Code::Aborted],
                    AnalysisClient::new(load.analysis.channel(load.next())).best_move(authed(
                        &token,
                        pb::BestMoveRequest {
                            source: Some(pb::best_move_request::Source::GameId(id.clone())),
                            strength: Some(pb::best_move_request::Strength::Level(1)),
                            clock: None,
                            seed: 1,
                        },
                    )),
                )
                .await;
            let Some(mv) = best.ok().and_then(|b| b.into_inner().r#move) else {
                continue;
            };
            if load
                .stats
                .time(
                    "Games.PlayMove",
                    &[Code::FailedPrecondition, Code::Aborted],
                    load.g().play_move(authed(
                        &token,
                        pb::PlayMoveRequest {
                            game_id: id.clone(),
                            r#move: text(&mv.notation),
                            expected_ply: u32::try_from(game.moves.len()).ok(),
                        },
                    )),
                )
                .await
                .is_ok()
            {
                mine += 1;
            }
        }
        let _ = load
            .stats
            .time(
                "Games.ExportPdn",
                &[],
                load.g().export_pdn(pb::GetGameRequest {
                    game_id: id.clone(),
                }),
            )
            .await;
        let _ = load
            .stats
            .time(
                "Games.Resign",
                &[Code::FailedPrecondition, Code::Aborted],
                load.g().resign(authed(&token, load.action(&id))),
            )
            .await;
        let _ = load
            .stats
            .time(
                "Games.ListGames",
                &[],
                load.g().list_games(pb::ListGamesRequest {
                    player_id: me,
                    ..pb::ListGamesRequest::default()
                }),
            )
            .await;
    }
}

/// Two guests: an invitation accepted, moves, a draw offered and accepted, watched by a spectator;
/// invitations declined and cancelled.
async fn people_traffic(load: Load, k: usize) {
    while load.going() {
        let (Some((_, a)), Some((b_id, b))) = (
            load.guest(&format!("A{k}")).await,
            load.guest(&format!("B{k}")).await,
        ) else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let invite = |token: &str| {
            authed(
                token,
                pb::CreateInvitationRequest {
                    rules: rules(VARIANTS[k % VARIANTS.len()]),
                    time_control: blitz(),
                    invitee_id: b_id.clone(),
                    color: pb::Color::White as i32,
                    rated: false,
                    fen: String::new(),
                    expires_in_ms: 0,
                    accept_key: String::new(),
                },
            )
        };
        let Ok(inv) = load
            .stats
            .time(
                "Games.CreateInvitation",
                &[],
                load.g().create_invitation(invite(&a)),
            )
            .await
        else {
            continue;
        };
        let inv = inv.into_inner().invitation_id;
        let req = |token: &str, id: &str| {
            authed(
                token,
                pb::InvitationRequest {
                    invitation_id: id.to_owned(),
                    accept_key: String::new(),
                },
            )
        };
        let _ = load
            .stats
            .time(
                "Games.GetInvitation",
                &[],
                load.g().get_invitation(req(&b, &inv)),
            )
            .await;
        let _ = load
            .stats
            .time(
                "Games.ListInvitations",
                &[],
                load.g()
                    .list_invitations(authed(&b, pb::ListInvitationsRequest {})),
            )
            .await;
        let Ok(game) = load
            .stats
            .time(
                "Games.AcceptInvitation",
                &[],
                load.g().accept_invitation(req(&b, &inv)),
            )
            .await
        else {
            continue;
        };
        let id = game.into_inner().game_id;
        // A spectator follows the game to its end.
        let spectator = load.clone();
        let watched = id.clone();
        let watch = tokio::spawn(async move {
            let opened = spectator
                .stats
                .time(
                    "Games.WatchGame (open)",
                    &[],
                    spectator
                        .g()
                        .watch_game(pb::WatchGameRequest { game_id: watched }),
                )
                .await;
            if let Ok(stream) = opened {
                let mut stream = stream.into_inner();
                while let Ok(Some(event)) = stream.message().await {
                    if matches!(event.kind, Some(pb::game_event::Kind::Finished(_))) {
                        break;
                    }
                }
            }
        });
        let _ = load.play_people(&id, &a, &b, 6).await;
        let _ = load
            .stats
            .time(
                "Games.OfferDraw",
                &[Code::FailedPrecondition, Code::Aborted],
                load.g().offer_draw(authed(&a, load.action(&id))),
            )
            .await;
        let accepted = load
            .stats
            .time(
                "Games.AcceptDraw",
                &[Code::FailedPrecondition, Code::Aborted],
                load.g().accept_draw(authed(&b, load.action(&id))),
            )
            .await;
        if accepted.is_err() {
            let _ = load
                .stats
                .time(
                    "Games.Resign",
                    &[Code::FailedPrecondition, Code::Aborted],
                    load.g().resign(authed(&a, load.action(&id))),
                )
                .await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), watch).await;
        // An invitation declined, another cancelled.
        if let Ok(inv) = load
            .stats
            .time(
                "Games.CreateInvitation",
                &[],
                load.g().create_invitation(invite(&a)),
            )
            .await
        {
            let _ = load
                .stats
                .time(
                    "Games.DeclineInvitation",
                    &[],
                    load.g().decline_invitation(authed(
                        &b,
                        pb::DeclineInvitationRequest {
                            invitation_id: inv.into_inner().invitation_id,
                            reason: 0,
                        },
                    )),
                )
                .await;
        }
        if let Ok(inv) = load
            .stats
            .time(
                "Games.CreateInvitation",
                &[],
                load.g().create_invitation(invite(&a)),
            )
            .await
        {
            let _ = load
                .stats
                .time(
                    "Games.CancelInvitation",
                    &[],
                    load.g()
                        .cancel_invitation(req(&a, &inv.into_inner().invitation_id)),
                )
                .await;
        }
    }
}

/// Two guests paired by a quick seek, a couple of moves, a resignation; the lobby's calls.
async fn matchmaking_traffic(load: Load, k: usize) {
    // A pool of its own per task: its two guests are paired with each other.
    let pool = [
        "english-3+2-casual",
        "russian-3+2-casual",
        "international-3+2-casual",
    ][k % 3];
    while load.going() {
        let mm = MatchmakingClient::new(load.matchmaking.channel(load.next()));
        let _ = load
            .stats
            .time(
                "Matchmaking.ListPools",
                &[],
                mm.clone().list_pools(pb::ListPoolsRequest {}),
            )
            .await;
        let _ = load
            .stats
            .time(
                "Matchmaking.ListLobbySeeks",
                &[],
                mm.clone().list_lobby_seeks(pb::ListLobbySeeksRequest {
                    variant: 0,
                    limit: 20,
                }),
            )
            .await;
        let (Some((a_id, a)), Some((_, b))) = (
            load.guest(&format!("S{k}")).await,
            load.guest(&format!("T{k}")).await,
        ) else {
            continue;
        };
        if let Ok(lobby) = load
            .stats
            .time(
                "Matchmaking.WatchLobby (first)",
                &[],
                mm.clone().watch_lobby(authed(&a, pb::WatchLobbyRequest {})),
            )
            .await
        {
            let _ =
                tokio::time::timeout(Duration::from_secs(5), lobby.into_inner().message()).await;
        }
        if let Ok(seek) = load
            .stats
            .time(
                "Matchmaking.CreateLobbySeek",
                &[],
                mm.clone().create_lobby_seek(authed(
                    &a,
                    pb::CreateLobbySeekRequest {
                        rules: rules(pb::Variant::Russian),
                        time_control: blitz(),
                        color: 0,
                        rated: false,
                        rating_range: None,
                        expires_in_ms: 0,
                    },
                )),
            )
            .await
        {
            let _ = load
                .stats
                .time(
                    "Matchmaking.Cancel",
                    &[],
                    mm.clone().cancel(authed(
                        &a,
                        pb::CancelRequest {
                            id: seek.into_inner().seek_id,
                        },
                    )),
                )
                .await;
        }
        let seek = |token: String| {
            let load = load.clone();
            let mm = MatchmakingClient::new(load.matchmaking.channel(load.next()));
            async move {
                let mut stream = load
                    .stats
                    .time(
                        "Matchmaking.Seek (open)",
                        &[],
                        mm.clone().seek(authed(
                            &token,
                            pb::SeekRequest {
                                pool_ids: vec![pool.into()],
                                rating_range: None,
                            },
                        )),
                    )
                    .await
                    .ok()?
                    .into_inner();
                let started = Instant::now();
                loop {
                    let event = tokio::time::timeout(Duration::from_secs(30), stream.message())
                        .await
                        .ok()?
                        .ok()??;
                    if let Some(pb::seek_event::Kind::Paired(p)) = event.kind {
                        let mut per = load.stats.per.lock().unwrap();
                        let entry =
                            per.entry("Matchmaking.Seek (to paired)")
                                .or_insert_with(|| {
                                    (Histogram::new_with_bounds(1, 600_000_000, 3).unwrap(), 0)
                                });
                        let _ = entry
                            .0
                            .record(u64::try_from(started.elapsed().as_micros()).unwrap_or(1));
                        return Some(p.game_id);
                    }
                }
            }
        };
        let (ga, gb) = tokio::join!(seek(a.clone()), seek(b.clone()));
        let (Some(id), Some(other)) = (ga, gb) else {
            continue;
        };
        assert_eq!(
            id, other,
            "the two seekers of a pool of their own are paired together"
        );
        let Some(game) = load.get(&id).await else {
            continue;
        };
        let white_is_a = game.white.as_ref().is_some_and(|w| w.id == a_id);
        let (w, bl) = if white_is_a { (&a, &b) } else { (&b, &a) };
        let _ = load.play_people(&id, w, bl, 2).await;
        let _ = load
            .stats
            .time(
                "Games.Resign",
                &[Code::FailedPrecondition, Code::Aborted],
                load.g().resign(authed(w, load.action(&id))),
            )
            .await;
    }
}

async fn ratings_traffic(load: Load) {
    let mut i = 0usize;
    while load.going() {
        i += 1;
        let player = format!("player:load-ai-{}-{}", i % 2, i % 4);
        let ch = RatingsClient::new(load.ratings.channel(load.next()));
        let category = Some(pb::RatingCategory {
            variant: pb::Variant::English as i32,
            speed: 0,
        });
        let _ = load
            .stats
            .time(
                "Ratings.GetRatings",
                &[],
                ch.clone().get_ratings(pb::GetRatingsRequest {
                    player_id: player.clone(),
                }),
            )
            .await;
        let _ = load
            .stats
            .time(
                "Ratings.GetRating",
                &[],
                ch.clone().get_rating(pb::GetRatingRequest {
                    player_id: player.clone(),
                    category,
                }),
            )
            .await;
        let _ = load
            .stats
            .time(
                "Ratings.Leaderboard",
                &[],
                ch.clone().leaderboard(pb::LeaderboardRequest {
                    category,
                    page_size: 50,
                    page_token: String::new(),
                    bots: false,
                }),
            )
            .await;
        let _ = load
            .stats
            .time(
                "Ratings.RatingHistory",
                &[],
                ch.clone().rating_history(pb::RatingHistoryRequest {
                    player_id: player.clone(),
                    category,
                    page_size: 20,
                    page_token: String::new(),
                }),
            )
            .await;
        let _ = load
            .stats
            .time(
                "Ratings.PredictResult",
                &[],
                ch.clone().predict_result(pb::PredictResultRequest {
                    player_a: player,
                    player_b: "player:load-ai-1-1".into(),
                    category,
                }),
            )
            .await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Analysis jobs of positions (watched to their end, or read back), the queue's status, a cancel.
async fn analysis_traffic(load: Load, k: usize) {
    let sub = format!("load-analyst-{k}");
    let token = player_token(&sub, "Analyst");
    let mut i = 0usize;
    while load.going() {
        i += 1;
        let an = AnalysisClient::new(load.analysis.channel(load.next()));
        let first = ["11-15", "9-13", "10-14", "12-16", "9-14", "10-15", "11-16"][i % 7];
        let second = [
            "23-19", "22-18", "24-20", "21-17", "22-17", "23-18", "24-19",
        ][(i / 7) % 7];
        let nodes = 2_000 + (i % 50) as u64 * 100;
        let job = load
            .stats
            .time(
                "Analysis.AnalyzePosition",
                &[],
                an.clone().analyze_position(authed(
                    &token,
                    pb::AnalyzePositionRequest {
                        source: Some(pb::analyze_position_request::Source::Position(
                            pb::PositionInput {
                                rules: rules(pb::Variant::English),
                                fen: String::new(),
                                moves: vec![text(first).unwrap(), text(second).unwrap()],
                            },
                        )),
                        limits: Some(pb::SearchLimits {
                            nodes,
                            ..pb::SearchLimits::default()
                        }),
                    },
                )),
            )
            .await;
        let Ok(job) = job else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let job_id = job.into_inner().job_id;
        let req = |id: &str| {
            authed(
                &token,
                pb::AnalysisJobRequest {
                    job_id: id.to_owned(),
                },
            )
        };
        if i.is_multiple_of(2) {
            if let Ok(stream) = load
                .stats
                .time(
                    "Analysis.WatchAnalysis (open)",
                    &[],
                    an.clone().watch_analysis(req(&job_id)),
                )
                .await
            {
                let mut stream = stream.into_inner();
                while let Ok(Ok(Some(update))) =
                    tokio::time::timeout(Duration::from_secs(30), stream.message()).await
                {
                    if matches!(update.kind, Some(pb::analysis_update::Kind::Finished(_))) {
                        break;
                    }
                }
            }
        } else {
            for _ in 0..300 {
                let Ok(view) = load
                    .stats
                    .time(
                        "Analysis.GetAnalysis",
                        &[],
                        an.clone().get_analysis(req(&job_id)),
                    )
                    .await
                else {
                    break;
                };
                let state = view.into_inner().state;
                if state != pb::JobState::Queued as i32 && state != pb::JobState::Running as i32 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        let _ = load
            .stats
            .time(
                "Analysis.QueueStatus",
                &[],
                an.clone()
                    .queue_status(authed(&token, pb::QueueStatusRequest {})),
            )
            .await;
        if i.is_multiple_of(10) {
            // A long job cancelled.
            if let Ok(long) = load
                .stats
                .time(
                    "Analysis.AnalyzePosition",
                    &[],
                    an.clone().analyze_position(authed(
                        &token,
                        pb::AnalyzePositionRequest {
                            source: Some(pb::analyze_position_request::Source::Position(
                                pb::PositionInput {
                                    rules: rules(pb::Variant::International),
                                    fen: String::new(),
                                    moves: vec![],
                                },
                            )),
                            limits: Some(pb::SearchLimits {
                                movetime_ms: 5_000 + i as u64,
                                ..pb::SearchLimits::default()
                            }),
                        },
                    )),
                )
                .await
            {
                let _ = load
                    .stats
                    .time(
                        "Analysis.CancelAnalysis",
                        &[],
                        an.clone().cancel_analysis(req(&long.into_inner().job_id)),
                    )
                    .await;
            }
        }
    }
}

/// Abuse beside the honest traffic (issue 38): a guest keeping four level-6 BestMoves in flight
/// (its bound is two), or looping "a game against ai:8, aborted" and "a lobby seek, cancelled".
/// Refusals are expected here; an honest call refused fails the test.
async fn abuse_traffic(load: Load, k: usize) {
    let Some((me, token)) = load.guest(&format!("Abuser {k}")).await else {
        return;
    };
    let refusals = [Code::ResourceExhausted, Code::PermissionDenied];
    let mut n = 0u64;
    while load.going() {
        n += 1;
        if k.is_multiple_of(2) {
            let calls = (0..4u64).map(|j| {
                let analysis = AnalysisClient::new(load.analysis.channel(load.next()));
                let req = authed(
                    &token,
                    pb::BestMoveRequest {
                        source: Some(pb::best_move_request::Source::Position(pb::PositionInput {
                            rules: rules(pb::Variant::International),
                            fen: String::new(),
                            moves: Vec::new(),
                        })),
                        strength: Some(pb::best_move_request::Strength::Level(6)),
                        clock: None,
                        seed: n * 8 + j,
                    },
                );
                let load = load.clone();
                async move {
                    let mut analysis = analysis;
                    let _ = load
                        .stats
                        .time(
                            "abuse: Analysis.BestMove (4 in flight)",
                            &refusals,
                            analysis.best_move(req),
                        )
                        .await;
                }
            });
            futures_util::future::join_all(calls).await;
        } else {
            let mut games = GamesClient::new(load.games.channel(load.next()));
            let made = load
                .stats
                .time(
                    "abuse: Games.CreateGame (ai:8, then Abort)",
                    &refusals,
                    games.create_game(authed(
                        &token,
                        pb::CreateGameRequest {
                            rules: rules(pb::Variant::International),
                            time_control: blitz(),
                            white: Some(pb::Player {
                                id: "ai:8".into(),
                                ..pb::Player::default()
                            }),
                            black: Some(pb::Player {
                                id: me.clone(),
                                ..pb::Player::default()
                            }),
                            rated: false,
                            fen: String::new(),
                            game_id: String::new(),
                            berserk_allowed: false,
                        },
                    )),
                )
                .await;
            if let Ok(game) = made {
                let _ = games
                    .abort(authed(
                        &token,
                        pb::GameActionRequest {
                            game_id: game.into_inner().game_id,
                        },
                    ))
                    .await;
            }
            let mut mm = MatchmakingClient::new(load.matchmaking.channel(load.next()));
            if let Ok(seek) = load
                .stats
                .time(
                    "abuse: Matchmaking.CreateLobbySeek (then Cancel)",
                    &refusals,
                    mm.create_lobby_seek(authed(
                        &token,
                        pb::CreateLobbySeekRequest {
                            rules: rules(pb::Variant::International),
                            time_control: blitz(),
                            ..Default::default()
                        },
                    )),
                )
                .await
            {
                let _ = mm
                    .cancel(authed(
                        &token,
                        pb::CancelRequest {
                            id: seek.into_inner().seek_id,
                        },
                    ))
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sustained_load_on_every_rpc_keeps_memory_flat() {
    if std::env::var("DRAUGHTS_LOAD").map_or(true, |v| v != "1") {
        eprintln!("opt-in: DRAUGHTS_LOAD=1 (and DRAUGHTS_LOAD_SECS, default 600)");
        return;
    }
    let secs: u64 = std::env::var("DRAUGHTS_LOAD_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let run = Duration::from_secs(secs);
    let warm_up = (run / 10).max(Duration::from_secs(30)).min(run / 2);
    let mut platform = Platform::start(
        Scale::SYSTEM,
        &[
            ("DRAUGHTS_RATE_LIMIT_GUEST_PER_MINUTE", "1000000"),
            ("DRAUGHTS_RATE_LIMIT_PLAYER_PER_MINUTE", "1000000"),
            ("DRAUGHTS_RATE_LIMIT_ANONYMOUS_PER_MINUTE", "1000000"),
            ("DRAUGHTS_RATE_LIMIT_API_KEY_PER_MINUTE", "1000000"),
            // Games against the computer in loops from one address (games.rs quotas).
            ("DRAUGHTS_AI_GAMES_PER_HOUR_GUEST", "1000000"),
            ("DRAUGHTS_AI_GAMES_PER_HOUR_PLAYER", "1000000"),
            ("DRAUGHTS_AI_GAMES_PER_HOUR_ADDRESS", "1000000"),
            ("DRAUGHTS_ANALYSIS_BEST_MOVES_PER_DAY_GUEST", "100000000"),
            ("DRAUGHTS_ANALYSIS_BEST_MOVES_PER_DAY_PLAYER", "100000000"),
            ("DRAUGHTS_ANALYSIS_JOBS_PER_DAY_PLAYER", "100000000"),
            (
                "DRAUGHTS_MATCHMAKING_VARIANTS",
                "english,russian,international",
            ),
            ("DRAUGHTS_MATCHMAKING_TIME_CONTROLS", "3+2"),
            ("DRAUGHTS_MATCHMAKING_WAVE_MS", "500"),
            ("DRAUGHTS_MAX_OPEN_GAMES_PER_PLAYER", "1000"),
            // Every client shares 127.0.0.1: per-address bounds would count honest clients with the
            // abusers (the per-guest and class bounds stay).
            (
                "DRAUGHTS_ANALYSIS_GUEST_BEST_MOVES_IN_FLIGHT_PER_ADDRESS",
                "1000",
            ),
            ("DRAUGHTS_MATCHMAKING_LOBBY_SEEKS_PER_ADDRESS", "0"),
        ],
    )
    .await;
    let started = Instant::now();
    let load = Load {
        games: Platform::replicas(&platform.validation),
        analysis: Platform::replicas(&platform.analysis),
        ratings: Platform::replicas(&platform.ratings),
        matchmaking: Platform::replicas(&platform.matchmaking),
        stats: Arc::default(),
        until: started + run,
        turn: Arc::default(),
    };
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..2 {
        tasks.spawn(rules_traffic(load.clone()));
    }
    for k in 0..2 {
        tasks.spawn(computer_traffic(load.clone(), k));
        tasks.spawn(people_traffic(load.clone(), k));
        tasks.spawn(matchmaking_traffic(load.clone(), k));
        tasks.spawn(analysis_traffic(load.clone(), k));
    }
    tasks.spawn(ratings_traffic(load.clone()));
    for k in 0..4 {
        tasks.spawn(abuse_traffic(load.clone(), k));
    }

    // Resident memory of every process: at the start, then every 5 s.
    let names: Vec<String> = platform.nodes_mut().map(|n| n.name.clone()).collect();
    let sample = |platform: &mut Platform| -> Vec<u64> {
        platform
            .nodes_mut()
            .map(|n| n.rss_kib().unwrap_or(0))
            .collect()
    };
    let at_start = sample(&mut platform);
    let mut at_warm = None;
    let mut max_after = vec![0u64; names.len()];
    let mut last = at_start.clone();
    let mut next_report = Instant::now() + Duration::from_secs(60);
    while Instant::now() < started + run {
        tokio::time::sleep(Duration::from_secs(5)).await;
        last = sample(&mut platform);
        if started.elapsed() >= warm_up {
            if at_warm.is_none() {
                at_warm = Some(last.clone());
            }
            for (m, v) in max_after.iter_mut().zip(&last) {
                *m = (*m).max(*v);
            }
        }
        if Instant::now() >= next_report {
            next_report += Duration::from_secs(60);
            let calls: u64 = load
                .stats
                .per
                .lock()
                .unwrap()
                .values()
                .map(|(h, _)| h.len())
                .sum();
            let rss: u64 = last.iter().sum();
            eprintln!(
                "load: {} s of {secs}, {calls} calls so far, all processes {} MiB resident",
                started.elapsed().as_secs(),
                rss / 1024
            );
        }
    }
    while tasks.join_next().await.is_some() {}
    let elapsed = started.elapsed().as_secs_f64();
    let crashed = platform.crashed();
    let at_warm = at_warm.expect("a sample after the warm-up");

    println!(
        "\nload test: {secs} s, warm-up {} s, 2 replicas of each service, 3 workers",
        warm_up.as_secs()
    );
    println!("| RPC | calls | per s | p50 ms | p99 ms | max ms | errors |");
    println!("|---|---|---|---|---|---|---|");
    let per = load.stats.per.lock().unwrap();
    let mut worst_error_rate = 0.0f64;
    for (name, (h, errors)) in per.iter() {
        let rate = *errors as f64 / h.len().max(1) as f64;
        worst_error_rate = worst_error_rate.max(rate);
        println!(
            "| {name} | {} | {:.1} | {:.2} | {:.2} | {:.1} | {errors} |",
            h.len(),
            h.len() as f64 / elapsed,
            h.value_at_quantile(0.5) as f64 / 1000.0,
            h.value_at_quantile(0.99) as f64 / 1000.0,
            h.max() as f64 / 1000.0,
        );
    }
    println!(
        "\n| process | RSS at start | after warm-up | at the end | highest after warm-up | growth after warm-up |"
    );
    println!("|---|---|---|---|---|---|");
    let mut worst_growth = 0.0f64;
    for (i, name) in names.iter().enumerate() {
        let growth = (max_after[i] as f64 - at_warm[i] as f64) / at_warm[i].max(1) as f64;
        worst_growth = worst_growth.max(growth);
        println!(
            "| {name} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:+.1}% |",
            at_start[i] as f64 / 1024.0,
            at_warm[i] as f64 / 1024.0,
            last[i] as f64 / 1024.0,
            max_after[i] as f64 / 1024.0,
            100.0 * growth
        );
    }
    assert!(
        crashed.is_empty(),
        "processes ended by themselves: {crashed:#?}"
    );
    let honest_refusals = load.stats.honest_refusals.load(Ordering::Relaxed);
    println!("honest calls refused (RESOURCE_EXHAUSTED) beside the abusers: {honest_refusals}");
    assert_eq!(honest_refusals, 0, "no honest call is refused");
    assert!(
        worst_error_rate <= 0.01,
        "at most 1% of any RPC's calls fail (worst {:.2}%)",
        100.0 * worst_error_rate
    );
    assert!(
        worst_growth <= 0.10,
        "every process's memory stays within 10% after the warm-up (worst {:+.1}%)",
        100.0 * worst_growth
    );
}
