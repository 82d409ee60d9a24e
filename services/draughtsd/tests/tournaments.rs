//! Tournaments through gRPC on the real platform: two replicas sharing one Redis and PostgreSQL (both
//! started by the test). Who may create, bad terms named; an arena played to its end through Games
//! (games created by the service, moves and resignations by the players), standings updated, the
//! event finished and archived; a duplicated `games.finished` entry counted once; a Swiss event started
//! early by its creator, with byes, played round by round to its end. Berserk end to end: White goes
//! berserk in every arena game (Games halves its clock: the arena's games allow it) and wins after 16
//! plies, each win scoring 3; in the Swiss event's games Games refuses it.

use std::collections::HashMap;
use std::time::Duration;

use draughts_proto::pb;
use draughts_store::LiveStore;
use draughts_testkit::ServiceUnderTest;
use draughts_testkit::games::authed;
use pb::tournaments_client::TournamentsClient;
use tonic::transport::Channel;

/// A change that makes terms bad.
type Spoil = Box<dyn Fn(&mut pb::TournamentTerms)>;

async fn replica(redis: &str, pg: &str) -> ServiceUnderTest {
    replica_with(redis, pg, |_| {}).await
}

async fn replica_with(
    redis: &str,
    pg: &str,
    change: impl FnOnce(&mut draughtsd::Config),
) -> ServiceUnderTest {
    let mut config = draughtsd::Config::for_tests(redis, pg);
    // The players make 18 calls a game, a game every few hundred milliseconds.
    config.auth.rate_limit_guest_per_minute = 1_000_000;
    change(&mut config);
    ServiceUnderTest::start(move |listener, shutdown| draughtsd::run(config, listener, shutdown))
        .await
}

/// A guest: (token, player id).
async fn guest(channel: &Channel, name: &str) -> (String, String) {
    let guest = pb::auth_client::AuthClient::new(channel.clone())
        .create_guest(pb::CreateGuestRequest {
            display_name: name.into(),
        })
        .await
        .unwrap()
        .into_inner();
    (guest.token, guest.player.unwrap().id)
}

/// A signed-up account's access token.
async fn account(channel: &Channel, username: &str) -> String {
    pb::auth_client::AuthClient::new(channel.clone())
        .sign_up(pb::SignUpRequest {
            username: username.into(),
            password: "correct horse battery".into(),
            display_name: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .access_token
}

fn terms(kind: pb::TournamentKind) -> pb::TournamentTerms {
    pb::TournamentTerms {
        name: "Test event".into(),
        kind: kind as i32,
        rules: Some(pb::RuleSet {
            variant: pb::Variant::International as i32,
            options: None,
        }),
        time_control: Some(pb::TimeControl {
            kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                base_ms: 180_000,
                increment_ms: 2_000,
            })),
        }),
        rated: false,
        start: Some(pb::tournament_terms::Start::StartInSeconds(0)),
        arena_duration_seconds: if kind == pb::TournamentKind::Arena {
            3
        } else {
            0
        },
        swiss_rounds: if kind == pb::TournamentKind::Swiss {
            2
        } else {
            0
        },
        round_start: 0,
        round_interval_seconds: 0,
        conditions: None,
        berserk_allowed: None,
    }
}

async fn create(
    channel: &Channel,
    token: &str,
    terms: pb::TournamentTerms,
) -> Result<pb::Tournament, tonic::Status> {
    TournamentsClient::new(channel.clone())
        .create_tournament(authed(
            token,
            pb::CreateTournamentRequest { terms: Some(terms) },
        ))
        .await
        .map(tonic::Response::into_inner)
}

async fn join(channel: &Channel, token: &str, id: &str) {
    try_join(channel, token, id, "").await.unwrap();
}

async fn try_join(
    channel: &Channel,
    token: &str,
    id: &str,
    password: &str,
) -> Result<pb::Tournament, tonic::Status> {
    TournamentsClient::new(channel.clone())
        .join_tournament(authed(
            token,
            pb::JoinTournamentRequest {
                tournament_id: id.into(),
                password: password.into(),
            },
        ))
        .await
        .map(tonic::Response::into_inner)
}

/// A refusal with its status code and the reason it names (the `draughts-reason` trailer, which a
/// client words in its reader's language).
#[track_caller]
fn assert_refused<T: std::fmt::Debug>(
    got: Result<T, tonic::Status>,
    code: tonic::Code,
    reason: pb::ErrorReason,
) {
    let e = got.expect_err("a refusal");
    assert_eq!(e.code(), code, "{e:?}");
    assert_eq!(draughts_proto::reason_of(&e), Some(reason), "{e:?}");
    assert_eq!(e.message(), draughts_proto::reason_text(reason));
}

async fn view(channel: &Channel, id: &str) -> pb::TournamentView {
    TournamentsClient::new(channel.clone())
        .get_tournament(pb::GetTournamentRequest {
            tournament_id: id.into(),
            standings_page_size: 0,
            standings_page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
}

async fn watch(channel: &Channel, id: &str) -> tonic::Streaming<pb::TournamentEvent> {
    TournamentsClient::new(channel.clone())
        .watch_tournament(pb::WatchTournamentRequest {
            tournament_id: id.into(),
        })
        .await
        .unwrap()
        .into_inner()
}

/// White goes berserk first (in an arena: Games halves its clock; in a Swiss event Games refuses it),
/// then each side plays the first legal move (international) until 16 plies, and Black resigns: White
/// wins, a berserk win long enough for the extra point (14 plies or more).
async fn play_out(
    channel: &Channel,
    tokens: &HashMap<String, String>,
    pairing: &pb::TournamentPairing,
    arena: bool,
) {
    let mut games = pb::games_client::GamesClient::new(channel.clone());
    let white = &tokens[&pairing.white.as_ref().unwrap().id];
    let black = &tokens[&pairing.black.as_ref().unwrap().id];
    let action = |token: &str| {
        authed(
            token,
            pb::GameActionRequest {
                game_id: pairing.game_id.clone(),
            },
        )
    };
    match games.berserk(action(white)).await {
        Ok(view) if arena => {
            let view = view.into_inner();
            assert!(view.white_berserk && !view.black_berserk);
            let clocks = view.clocks.unwrap();
            assert_eq!((clocks.white_ms, clocks.black_ms), (90_000, 180_000));
        }
        Err(e) if !arena => assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}"),
        other => panic!("berserk in an arena: {arena}; got {other:?}"),
    }
    let mut game = draughts_engine::Game::new(draughts_engine::Position::start(
        draughts_engine::Variant::International,
    ));
    for ply in 0..16 {
        let mv = game.position().legal_moves()[0];
        let text = game.position().move_to_text(&mv);
        game.play(&mv).unwrap();
        let token = if ply % 2 == 0 { white } else { black };
        games
            .play_move(authed(
                token,
                pb::PlayMoveRequest {
                    game_id: pairing.game_id.clone(),
                    r#move: Some(pb::MoveInput {
                        r#move: Some(pb::move_input::Move::Text(text)),
                    }),
                    expected_ply: Some(ply),
                },
            ))
            .await
            .unwrap();
    }
    games.resign(action(black)).await.unwrap();
}

/// Follows the event to its end, playing out every game paired; returns the results seen and the
/// rounds started (with their byes).
async fn play_event(
    watcher: &mut tonic::Streaming<pb::TournamentEvent>,
    player_channel: &Channel,
    tokens: &HashMap<String, String>,
    arena: bool,
) -> (Vec<pb::TournamentResult>, Vec<pb::RoundStarted>) {
    use pb::tournament_event::Kind;
    let mut results = Vec::new();
    let mut rounds = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(20), watcher.message())
            .await
            .expect("an event within 20 s")
            .unwrap()
            .expect("the stream ends only after `finished`");
        match event.kind.unwrap() {
            Kind::Paired(pairing) => play_out(player_channel, tokens, &pairing, arena).await,
            Kind::Result(result) => results.push(result),
            Kind::RoundStarted(round) => rounds.push(round),
            Kind::Finished(t) => {
                assert_eq!(t.state, pb::TournamentState::Finished as i32);
                return (results, rounds);
            }
            _ => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tournaments_through_grpc_on_two_replicas() {
    let redis = draughts_testkit::RedisServer::start().expect("redis-server");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres");
    let a = replica(&redis.url(), &pg.url()).await;
    let b = replica(&redis.url(), &pg.url()).await;
    let (ca, cb) = (a.channel().await, b.channel().await);

    // Who may create: not a guest.
    let (guest_token, _) = guest(&ca, "Guest").await;
    let refused = create(&ca, &guest_token, terms(pb::TournamentKind::Arena))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    let organiser = account(&ca, "organiser").await;

    // Bad terms, each named.
    let bad: Vec<(&str, Spoil)> = vec![
        (
            "arena_duration_seconds",
            Box::new(|t| t.arena_duration_seconds = 0),
        ),
        (
            "arena_duration_seconds",
            Box::new(|t| t.arena_duration_seconds = 365 * 86_400),
        ),
        (
            "time_control",
            Box::new(|t| {
                t.time_control = Some(pb::TimeControl {
                    kind: Some(pb::time_control::Kind::Correspondence(pb::Correspondence {
                        days_per_move: 3,
                    })),
                })
            }),
        ),
        ("swiss_rounds", Box::new(|t| t.swiss_rounds = 3)),
        ("kind", Box::new(|t| t.kind = 7)),
        (
            "rules",
            Box::new(|t| {
                t.rules = Some(pb::RuleSet {
                    variant: pb::Variant::International as i32,
                    options: Some(pb::RuleOptions {
                        no_mandatory_capture: true,
                        ..Default::default()
                    }),
                })
            }),
        ),
        ("name", Box::new(|t| t.name = " ".into())),
    ];
    for (field, spoil) in &bad {
        let mut t = terms(pb::TournamentKind::Arena);
        spoil(&mut t);
        let e = create(&ca, &organiser, t).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{field}: {e:?}");
        assert!(e.message().contains(field), "{field}: {}", e.message());
    }
    let mut swiss = terms(pb::TournamentKind::Swiss);
    swiss.swiss_rounds = 5;
    swiss.conditions = Some(pb::EntryConditions {
        max_players: 4,
        ..Default::default()
    });
    let e = create(&ca, &organiser, swiss).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("swiss_rounds"), "{}", e.message());

    // An arena: two guests, one on each replica, watched from replica b, played from replica a.
    let arena = create(&ca, &organiser, terms(pb::TournamentKind::Arena))
        .await
        .unwrap();
    let id = arena.tournament_id.clone();
    let mut tokens = HashMap::new();
    let mut watcher = watch(&cb, &id).await;
    for (name, channel) in [("Ann", &ca), ("Bob", &cb)] {
        let (token, player) = guest(channel, name).await;
        join(channel, &token, &id).await;
        tokens.insert(player, token);
    }
    let (results, _) = play_event(&mut watcher, &ca, &tokens, true).await;
    assert!(!results.is_empty(), "games were played");
    assert!(
        results
            .iter()
            .all(|r| r.outcome == pb::Outcome::WhiteWins as i32
                && !r.forfeit
                && r.white_berserk
                && !r.black_berserk)
    );
    let done = view(&cb, &id).await;
    let t = done.tournament.unwrap();
    assert_eq!(t.state, pb::TournamentState::Finished as i32);
    assert!(done.pairings.is_empty());
    let games: u32 = done.standings.iter().map(|r| r.games).sum();
    assert_eq!(
        games as usize,
        2 * results.len(),
        "every result counted once"
    );
    let wins: u32 = done.standings.iter().map(|r| r.wins).sum();
    assert_eq!(wins as usize, results.len());
    // Every win a berserk win of 16 plies: 2 + 1 (4 + 1 on fire), every loss 0.
    assert!(done.standings.iter().any(|r| r.points >= 3));
    for row in &done.standings {
        assert!(
            row.sheet
                .split_whitespace()
                .all(|p| p == "3" || p == "5" || p == "0"),
            "{}",
            row.sheet
        );
    }
    // Archived: listed with the finished events.
    let finished = TournamentsClient::new(ca.clone())
        .list_tournaments(pb::ListTournamentsRequest {
            state: pb::TournamentState::Finished as i32,
            page_size: 10,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(finished.tournaments.iter().any(|t| t.tournament_id == id));
    let (late, _) = guest(&cb, "Late").await;
    assert_refused(
        try_join(&cb, &late, &id, "").await,
        tonic::Code::FailedPrecondition,
        pb::ErrorReason::TournamentOver,
    );

    // A finished entry of the arena delivered again changes nothing.
    let live = draughts_store::RedisStore::connect(&redis.url(), "test:")
        .await
        .unwrap();
    let entries = live
        .range(draughts_proto::contract::finished::STREAM, None, 10_000)
        .await
        .unwrap();
    let again = entries
        .iter()
        .find(|e| {
            draughts_proto::contract::finished::decode(&e.payload)
                .is_ok_and(|f| f.game_id.starts_with(&id))
        })
        .expect("the arena's games are on games.finished");
    live.append(
        draughts_proto::contract::finished::STREAM,
        again.payload.clone(),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = view(&ca, &id).await;
    assert_eq!(after.standings, done.standings, "a duplicate counts once");

    // A Swiss event of 2 rounds for 3 players, started early by its creator only.
    let mut swiss = terms(pb::TournamentKind::Swiss);
    swiss.start = Some(pb::tournament_terms::Start::StartInSeconds(3600));
    let event = create(&cb, &organiser, swiss).await.unwrap();
    let sid = event.tournament_id.clone();
    let mut tokens = HashMap::new();
    let mut first = String::new();
    for name in ["Cy", "Di", "Ed"] {
        let (token, player) = guest(&ca, name).await;
        join(&ca, &token, &sid).await;
        first = token.clone();
        tokens.insert(player, token);
    }
    let mut watcher = watch(&ca, &sid).await;
    let e = TournamentsClient::new(ca.clone())
        .start_tournament(authed(
            &first,
            pb::StartTournamentRequest {
                tournament_id: sid.clone(),
            },
        ))
        .await;
    assert_refused(
        e,
        tonic::Code::PermissionDenied,
        pb::ErrorReason::NotTheCreator,
    );
    TournamentsClient::new(cb.clone())
        .start_tournament(authed(
            &organiser,
            pb::StartTournamentRequest {
                tournament_id: sid.clone(),
            },
        ))
        .await
        .unwrap();
    let (results, rounds) = play_event(&mut watcher, &cb, &tokens, false).await;
    assert_eq!(results.len(), 2, "one game a round");
    assert_eq!(
        rounds.iter().map(|r| r.round).collect::<Vec<_>>(),
        vec![1, 2]
    );
    let byes: Vec<String> = rounds
        .iter()
        .map(|r| r.bye.as_ref().expect("a bye each round").id.clone())
        .collect();
    assert_ne!(byes[0], byes[1], "never twice the same bye");
    let done = view(&ca, &sid).await;
    let points: i32 = done.standings.iter().map(|r| r.points).sum();
    assert_eq!(
        points,
        2 * 2 + 2 * 2,
        "a win and a bye a round, 2 half-points each"
    );
    assert_eq!(
        done.tournament.unwrap().state,
        pb::TournamentState::Finished as i32
    );

    a.stop().await;
    b.stop().await;
}

/// Each entry condition, checked at the edge: the password of a private event, accounts only, the
/// rating range and the most entrants each refuse with their code and named reason, and let in
/// whoever meets them; so do an unknown tournament and leaving an event one has not joined. A bot is
/// refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entry_conditions_refuse_with_their_reasons() {
    let redis = draughts_testkit::RedisServer::start().expect("redis-server");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres");
    // Six events from one organiser (three are allowed by default).
    let a = replica_with(&redis.url(), &pg.url(), |config| {
        config.tournaments.tournaments_max_open_per_creator = 10;
    })
    .await;
    let ca = a.channel().await;
    let organiser = account(&ca, "organiser").await;
    let with = |conditions: pb::EntryConditions| {
        let mut t = terms(pb::TournamentKind::Swiss);
        t.start = Some(pb::tournament_terms::Start::StartInSeconds(3600));
        t.conditions = Some(conditions);
        t
    };
    let (ann, _) = guest(&ca, "Ann").await;
    let (bob, _) = guest(&ca, "Bob").await;
    let (cy, _) = guest(&ca, "Cy").await;

    // A private event: no password or a wrong one is refused; the right one lets in.
    let private = create(
        &ca,
        &organiser,
        with(pb::EntryConditions {
            password: "open sesame".into(),
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert!(private.has_password);
    let id = &private.tournament_id;
    for wrong in ["", "open sesam", "OPEN SESAME"] {
        assert_refused(
            try_join(&ca, &ann, id, wrong).await,
            tonic::Code::PermissionDenied,
            pb::ErrorReason::TournamentPassword,
        );
    }
    try_join(&ca, &ann, id, "open sesame").await.unwrap();

    // Accounts only: a guest is refused, an account enters.
    let members = create(
        &ca,
        &organiser,
        with(pb::EntryConditions {
            accounts_only: true,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    assert_refused(
        try_join(&ca, &ann, &members.tournament_id, "").await,
        tonic::Code::FailedPrecondition,
        pb::ErrorReason::TournamentAccountsOnly,
    );
    let dee = account(&ca, "dee").await;
    try_join(&ca, &dee, &members.tournament_id, "")
        .await
        .unwrap();

    // A rating range that a new player's rating is below, and one it is above.
    for (min_rating, max_rating) in [(1_900, 0), (0, 1_100)] {
        let ranged = create(
            &ca,
            &organiser,
            with(pb::EntryConditions {
                min_rating,
                max_rating,
                ..Default::default()
            }),
        )
        .await
        .unwrap();
        assert_refused(
            try_join(&ca, &bob, &ranged.tournament_id, "").await,
            tonic::Code::FailedPrecondition,
            pb::ErrorReason::TournamentRatingRange,
        );
    }
    let fits = create(
        &ca,
        &organiser,
        with(pb::EntryConditions {
            min_rating: 1_100,
            max_rating: 1_900,
            ..Default::default()
        }),
    )
    .await
    .unwrap();
    try_join(&ca, &bob, &fits.tournament_id, "").await.unwrap();

    // Two places: the third is refused; an entrant joining again is not a newcomer.
    let mut two = with(pb::EntryConditions {
        max_players: 2,
        ..Default::default()
    });
    two.swiss_rounds = 1;
    let small = create(&ca, &organiser, two).await.unwrap();
    let sid = &small.tournament_id;
    try_join(&ca, &ann, sid, "").await.unwrap();
    try_join(&ca, &bob, sid, "").await.unwrap();
    assert_refused(
        try_join(&ca, &cy, sid, "").await,
        tonic::Code::FailedPrecondition,
        pb::ErrorReason::TournamentFull,
    );
    try_join(&ca, &ann, sid, "").await.unwrap();

    // Leaving a Swiss event withdraws (the row stays, marked); joining again comes back.
    let leave = |token: String, id: String| {
        let channel = ca.clone();
        async move {
            TournamentsClient::new(channel)
                .leave_tournament(authed(
                    &token,
                    pb::LeaveTournamentRequest { tournament_id: id },
                ))
                .await
                .map(tonic::Response::into_inner)
        }
    };
    let gone = leave(bob.clone(), sid.clone()).await.unwrap();
    assert_eq!(gone.players, 2, "a withdrawn entrant is still an entrant");
    let rows = view(&ca, sid).await.standings;
    assert_eq!(rows.iter().filter(|r| r.withdrawn).count(), 1, "{rows:?}");
    let back = try_join(&ca, &bob, sid, "").await.unwrap();
    assert!(back.joined);
    assert!(!view(&ca, sid).await.standings.iter().any(|r| r.withdrawn));

    // The standings a row a page, to the end.
    let mut token = String::new();
    let mut seen = Vec::new();
    loop {
        let page = TournamentsClient::new(ca.clone())
            .get_tournament(pb::GetTournamentRequest {
                tournament_id: sid.clone(),
                standings_page_size: 1,
                standings_page_token: token.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.standings.len() <= 1);
        seen.extend(page.standings.into_iter().map(|r| r.player.unwrap().id));
        if page.next_standings_page_token.is_empty() {
            break;
        }
        token = page.next_standings_page_token;
        assert!(seen.len() <= 2, "the pages end");
    }
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), 2, "each entrant once");

    // The upcoming events, two a page: each once, all of them.
    let mut token = String::new();
    let mut listed = Vec::new();
    loop {
        let page = TournamentsClient::new(ca.clone())
            .list_tournaments(pb::ListTournamentsRequest {
                state: pb::TournamentState::Upcoming as i32,
                page_size: 2,
                page_token: token.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(page.tournaments.len() <= 2);
        listed.extend(page.tournaments.into_iter().map(|t| t.tournament_id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
        assert!(listed.len() <= 6, "the pages end");
    }
    let made = [
        &private.tournament_id,
        &members.tournament_id,
        &fits.tournament_id,
        sid,
    ];
    for id in made {
        assert_eq!(
            listed.iter().filter(|l| l == &id).count(),
            1,
            "{id} listed once"
        );
    }

    // A Swiss event with one entrant cannot start early.
    let e = TournamentsClient::new(ca.clone())
        .start_tournament(authed(
            &organiser,
            pb::StartTournamentRequest {
                tournament_id: members.tournament_id.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("at least 2"), "{}", e.message());

    // A bot (an API key with the `bot` scope) meets people through challenges only: refused.
    let admin = draughts_validation::auth::AuthConfig::for_tests()
        .admin_api_key
        .unwrap();
    let bot = pb::auth_client::AuthClient::new(ca.clone())
        .create_api_key(authed(
            &admin,
            pb::CreateApiKeyRequest {
                owner: "tbot".into(),
                scopes: vec![pb::AuthScope::Play as i32, pb::AuthScope::Bot as i32],
                rate_limit_per_minute: 0,
                expires_in_secs: 0,
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .key;
    let e = try_join(&ca, &bot, &fits.tournament_id, "")
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("bots"), "{}", e.message());

    // Leaving an event one has not joined; an unknown (well-formed) tournament.
    let left = leave(cy.clone(), sid.clone()).await;
    assert_refused(
        left,
        tonic::Code::FailedPrecondition,
        pb::ErrorReason::NotAnEntrant,
    );
    let mut unknown = sid.clone();
    let last = unknown.pop().unwrap();
    unknown.push(if last == '0' { '1' } else { '0' });
    assert_refused(
        try_join(&ca, &cy, &unknown, "").await,
        tonic::Code::NotFound,
        pb::ErrorReason::NoSuchTournament,
    );
}

/// A rated event's games are rated like any rated game: two accounts play a rated Swiss round through
/// Games, and Ratings counts the game once for each, the winner up and the loser down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rated_event_s_games_move_its_players_ratings() {
    let redis = draughts_testkit::RedisServer::start().expect("redis-server");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres");
    let a = replica(&redis.url(), &pg.url()).await;
    let ca = a.channel().await;
    let organiser = account(&ca, "organiser").await;
    let mut rated = terms(pb::TournamentKind::Swiss);
    rated.rated = true;
    rated.swiss_rounds = 1;
    rated.start = Some(pb::tournament_terms::Start::StartInSeconds(3600));
    let event = create(&ca, &organiser, rated).await.unwrap();
    let id = event.tournament_id.clone();
    let mut tokens = HashMap::new();
    for name in ["annr", "bobr"] {
        let token = account(&ca, name).await;
        let me = pb::auth_client::AuthClient::new(ca.clone())
            .who_am_i(authed(&token, pb::WhoAmIRequest::default()))
            .await
            .unwrap()
            .into_inner()
            .player
            .unwrap();
        join(&ca, &token, &id).await;
        tokens.insert(me.id, token);
    }
    let mut watcher = watch(&ca, &id).await;
    TournamentsClient::new(ca.clone())
        .start_tournament(authed(
            &organiser,
            pb::StartTournamentRequest {
                tournament_id: id.clone(),
            },
        ))
        .await
        .unwrap();
    let (results, _) = play_event(&mut watcher, &ca, &tokens, false).await;
    assert_eq!(results.len(), 1, "one game in one round");
    let result = &results[0];
    assert_eq!(result.outcome, pb::Outcome::WhiteWins as i32);
    let (white, black) = (
        result.white.as_ref().unwrap().id.clone(),
        result.black.as_ref().unwrap().id.clone(),
    );
    let ratings = pb::ratings_client::RatingsClient::new(ca.clone());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let rated_once = |id: String| {
        let mut ratings = ratings.clone();
        async move {
            let all = ratings
                .get_ratings(pb::GetRatingsRequest { player_id: id })
                .await
                .unwrap()
                .into_inner()
                .ratings;
            assert!(all.len() <= 1, "{all:?}");
            all.into_iter().next()
        }
    };
    let (w, b) = loop {
        if let (Some(w), Some(b)) = (
            rated_once(white.clone()).await,
            rated_once(black.clone()).await,
        ) {
            break (w, b);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the rated game reached Ratings"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!((w.games, w.wins, b.games, b.losses), (1, 1, 1, 1));
    assert!(w.rating > 1500.0 && b.rating < 1500.0, "{w:?} {b:?}");
}
