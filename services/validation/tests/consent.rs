//! Consent and identity at game creation, as an attacker would try them: made-up and malformed opponents,
//! games forced on a real player, names and "is a computer" from the caller, games ended before both
//! sides moved; and the invitation flow a real player uses (events without polling, accept, decline,
//! cancel, expiry, open links raced by two accepters, rematches).

use std::time::Duration;

use draughts_engine::{RuleSet, Variant};
use draughts_proto::convert;
use draughts_proto::pb;
use draughts_proto::pb::games_client::GamesClient;
use draughts_testkit::{RedisServer, ServiceUnderTest, authed, guest};
use draughts_validation::Config;
use futures_util::StreamExt;
use tonic::Code;
use tonic::transport::Channel;

fn config() -> Config {
    let mut c = Config::for_tests();
    c.auth.rate_limit_guest_per_minute = 1_000_000;
    c.auth.rate_limit_anonymous_per_minute = 1_000_000;
    c.games.first_move_secs = 1;
    c
}

async fn start() -> (ServiceUnderTest, Channel) {
    start_with(config()).await
}

async fn start_with(config: Config) -> (ServiceUnderTest, Channel) {
    let server = ServiceUnderTest::start(|listener, shutdown| {
        draughts_validation::run(config, listener, shutdown)
    })
    .await;
    let channel = server.channel().await;
    (server, channel)
}

fn fischer(base_ms: u64) -> Option<pb::TimeControl> {
    Some(pb::TimeControl {
        kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
            base_ms,
            increment_ms: 0,
        })),
    })
}

fn player(id: &str) -> Option<pb::Player> {
    Some(pb::Player {
        id: id.into(),
        ..Default::default()
    })
}

fn create(white: &str, black: &str) -> pb::CreateGameRequest {
    pb::CreateGameRequest {
        rules: Some(convert::rules_to_wire(RuleSet::new(Variant::English))),
        time_control: fischer(60_000),
        white: player(white),
        black: player(black),
        rated: true,
        fen: String::new(),
        game_id: String::new(),
        berserk_allowed: false,
    }
}

fn invite(invitee: &str) -> pb::CreateInvitationRequest {
    pb::CreateInvitationRequest {
        rules: Some(convert::rules_to_wire(RuleSet::new(Variant::English))),
        time_control: fischer(60_000),
        invitee_id: invitee.into(),
        color: pb::Color::White as i32,
        rated: true,
        fen: String::new(),
        expires_in_ms: 0,
        accept_key: String::new(),
    }
}

fn inv_req(token: &str, id: &str) -> tonic::Request<pb::InvitationRequest> {
    authed(
        token,
        pb::InvitationRequest {
            invitation_id: id.into(),
            accept_key: String::new(),
        },
    )
}

fn play(token: &str, id: &str, mv: &str) -> tonic::Request<pb::PlayMoveRequest> {
    authed(
        token,
        pb::PlayMoveRequest {
            game_id: id.into(),
            r#move: Some(pb::MoveInput {
                r#move: Some(pb::move_input::Move::Text(mv.into())),
            }),
            expected_ply: None,
        },
    )
}

fn action(token: &str, id: &str) -> tonic::Request<pb::GameActionRequest> {
    authed(token, pb::GameActionRequest { game_id: id.into() })
}

/// The findings of the attack: a made-up opponent, a malformed one, a real one who never agreed, and
/// names or computer flags chosen by the caller: all refused or ignored.
#[tokio::test]
async fn nobody_can_be_put_in_a_game_without_consent() {
    let (server, ch) = start().await;
    let mut games = GamesClient::new(ch.clone());
    let ann = guest(&ch, "Ann").await;
    let bob = guest(&ch, "Bob").await;
    // Made-up ids (well formed, never issued): NOT_FOUND, for CreateGame and for invitations.
    let made_up = "guest:0123456789abcdef0123456789abcdef";
    for (white, black) in [(ann.id.as_str(), made_up), (made_up, ann.id.as_str())] {
        let e = games
            .create_game(authed(&ann.token, create(white, black)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::NotFound, "{}", e.message());
    }
    let e = games
        .create_invitation(authed(&ann.token, invite(made_up)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    // Malformed ids (a NUL byte, white space, no known kind, too long): INVALID_ARGUMENT.
    let long = format!("player:{}", "x".repeat(200));
    for bad in [
        "guest:ab\0cd",
        "guest:a b",
        "somebody",
        "ai:9",
        long.as_str(),
    ] {
        let e = games
            .create_game(authed(&ann.token, create(&ann.id, bad)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{bad:?}: {}", e.message());
        assert!(!e.message().contains('\0'));
        let e = games
            .create_invitation(authed(&ann.token, invite(bad)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{bad:?}");
    }
    // A real player who did not agree: no game (send an invitation instead).
    let e = games
        .create_game(authed(&ann.token, create(&ann.id, &bob.id)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("invitation"), "{}", e.message());
    // Nor a game between two others.
    let carl = guest(&ch, "Carl").await;
    let e = games
        .create_game(authed(&ann.token, create(&bob.id, &carl.id)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    // The computer always agrees; names and flags come from the server, whatever the request says.
    let mut req = create(&ann.id, "ai:3");
    req.white = Some(pb::Player {
        id: ann.id.clone(),
        display_name: "Magnus\n[Result \"1-0\"]".into(),
        guest: false,
        computer: true,
        bot: true,
    });
    let g = games
        .create_game(authed(&ann.token, req))
        .await
        .unwrap()
        .into_inner();
    let white = g.white.unwrap();
    let black = g.black.unwrap();
    assert_eq!(
        (
            white.display_name.as_str(),
            white.guest,
            white.computer,
            white.bot
        ),
        ("Ann", true, false, false)
    );
    assert_eq!(
        (black.display_name.as_str(), black.computer),
        ("Computer level 3", true)
    );
    let pdn = games
        .export_pdn(pb::GetGameRequest {
            game_id: g.game_id.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .pdn;
    assert!(pdn.contains("[White \"Ann\"]"), "{pdn}");
    assert_eq!(pdn.matches("[Result").count(), 1, "{pdn}");
    // The invitee's name is its own, not the inviter's choice.
    let inv = games
        .create_invitation(authed(&ann.token, invite(&bob.id)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(inv.invitee.unwrap().display_name, bob.name);
    server.stop().await;
}

/// Before both sides have moved nothing is decided: a resignation (even by a second guest of one's
/// own), an agreed draw, or a missed first move aborts the game, so no rating can be farmed from it.
#[tokio::test]
async fn games_ended_before_both_sides_moved_are_aborted() {
    let (server, ch) = start().await;
    let mut games = GamesClient::new(ch.clone());
    let ann = guest(&ch, "Ann").await;
    let bob = guest(&ch, "Bob").await;
    // A 1 ms rated game: its clock does not run before both sides moved, so nobody flags.
    let mut req = create(&ann.id, &bob.id);
    req.time_control = fischer(1);
    let g = draughts_testkit::agreed_game(&ch, &ann.token, &bob.token, req.clone())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let v = games
        .resign(action(&bob.token, &g.game_id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v.status.unwrap().outcome, pb::Outcome::Aborted as i32);
    // A missed first move: aborted by the server after --first-move-secs (1 s here), not lost on time.
    let g = draughts_testkit::agreed_game(&ch, &ann.token, &bob.token, req.clone())
        .await
        .unwrap();
    games
        .play_move(play(&bob.token, &g.game_id, "11-15"))
        .await
        .unwrap();
    let mut status = None;
    for _ in 0..60 {
        let v = games
            .get_game(pb::GetGameRequest {
                game_id: g.game_id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        let st = v.status.unwrap();
        if st.outcome != pb::Outcome::Ongoing as i32 {
            status = Some(st);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let st = status.expect("the game was aborted");
    assert_eq!(st.outcome, pb::Outcome::Aborted as i32);
    assert!(
        st.description.contains("no first move"),
        "{}",
        st.description
    );
    // Once both sides moved, the clock runs and a flag is a loss.
    let mut req = create(&ann.id, &bob.id);
    req.time_control = fischer(200);
    let g = draughts_testkit::agreed_game(&ch, &ann.token, &bob.token, req)
        .await
        .unwrap();
    games
        .play_move(play(&bob.token, &g.game_id, "11-15"))
        .await
        .unwrap();
    games
        .play_move(play(&ann.token, &g.game_id, "23-19"))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let v = games
        .get_game(pb::GetGameRequest {
            game_id: g.game_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    let st = v.status.unwrap();
    assert_eq!(st.outcome, pb::Outcome::WhiteWins as i32, "{st:?}");
    assert_eq!(st.reason, pb::EndReason::Time as i32);
    server.stop().await;
}

async fn next_event(events: &mut tonic::Streaming<pb::PlayerEvent>) -> pb::player_event::Kind {
    tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("an event within 5 s")
        .expect("the stream goes on")
        .unwrap()
        .kind
        .unwrap()
}

/// The invited player hears of the invitation on its event stream (no polling), accepts, and both see
/// the game start; a declined invitation reaches the inviter with its reason; cancel and expiry.
#[tokio::test]
async fn invitations_reach_the_invitee_and_start_the_game_on_acceptance() {
    use pb::player_event::Kind;
    let (server, ch) = start().await;
    let mut games = GamesClient::new(ch.clone());
    let ann = guest(&ch, "Ann").await;
    let bob = guest(&ch, "Bob").await;
    let mut bob_events = games
        .watch_player_events(authed(&bob.token, pb::WatchPlayerEventsRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(matches!(
        next_event(&mut bob_events).await,
        Kind::Synced(true)
    ));
    let inv = games
        .create_invitation(authed(&ann.token, invite(&bob.id)))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(inv.state, pb::InvitationState::Pending as i32);
    match next_event(&mut bob_events).await {
        Kind::Invitation(i) => {
            assert_eq!(i.invitation_id, inv.invitation_id);
            assert_eq!(i.inviter.unwrap().display_name, "Ann");
        }
        other => panic!("expected the invitation, got {other:?}"),
    }
    // Nobody else sees or accepts it; the inviter cannot accept it.
    let carl = guest(&ch, "Carl").await;
    let e = games
        .get_invitation(inv_req(&carl.token, &inv.invitation_id))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let e = games
        .accept_invitation(inv_req(&carl.token, &inv.invitation_id))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    let e = games
        .accept_invitation(inv_req(&ann.token, &inv.invitation_id))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    // Listed for both.
    let listed = games
        .list_invitations(authed(&bob.token, pb::ListInvitationsRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.received.len(), 1);
    let listed = games
        .list_invitations(authed(&ann.token, pb::ListInvitationsRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.sent.len(), 1);
    // Bob accepts: the game has the invitation's id, Ann is White as asked; accepting again is the same
    // game, not a second one.
    let game = games
        .accept_invitation(inv_req(&bob.token, &inv.invitation_id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(game.game_id, inv.invitation_id);
    assert_eq!(game.white.unwrap().id, ann.id);
    let again = games
        .accept_invitation(inv_req(&bob.token, &inv.invitation_id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.game_id, game.game_id);
    let mut saw_start = false;
    for _ in 0..3 {
        if let Kind::GameStarted(v) = next_event(&mut bob_events).await {
            assert_eq!(v.game_id, game.game_id);
            saw_start = true;
            break;
        }
    }
    assert!(saw_start, "Bob hears that the game started");
    // Declined, with a reason, heard by the inviter.
    let mut ann_events = games
        .watch_player_events(authed(&ann.token, pb::WatchPlayerEventsRequest {}))
        .await
        .unwrap()
        .into_inner();
    loop {
        if matches!(next_event(&mut ann_events).await, Kind::Synced(true)) {
            break;
        }
    }
    let inv = games
        .create_invitation(authed(&ann.token, invite(&bob.id)))
        .await
        .unwrap()
        .into_inner();
    games
        .decline_invitation(authed(
            &bob.token,
            pb::DeclineInvitationRequest {
                invitation_id: inv.invitation_id.clone(),
                reason: pb::DeclineReason::TooFast as i32,
            },
        ))
        .await
        .unwrap();
    let mut declined = false;
    for _ in 0..3 {
        if let Kind::Invitation(i) = next_event(&mut ann_events).await
            && i.state == pb::InvitationState::Declined as i32
        {
            assert_eq!(i.decline_reason, pb::DeclineReason::TooFast as i32);
            declined = true;
            break;
        }
    }
    assert!(declined, "Ann hears of the decline");
    let e = games
        .accept_invitation(inv_req(&bob.token, &inv.invitation_id))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    // Cancelled by the inviter: too late to accept.
    let inv = games
        .create_invitation(authed(&ann.token, invite(&bob.id)))
        .await
        .unwrap()
        .into_inner();
    games
        .cancel_invitation(inv_req(&ann.token, &inv.invitation_id))
        .await
        .unwrap();
    let e = games
        .accept_invitation(inv_req(&bob.token, &inv.invitation_id))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("cancelled"), "{}", e.message());
    // Expired.
    let mut short = invite(&bob.id);
    short.expires_in_ms = 150;
    let inv = games
        .create_invitation(authed(&ann.token, short))
        .await
        .unwrap()
        .into_inner();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = games
        .get_invitation(inv_req(&bob.token, &inv.invitation_id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.state, pb::InvitationState::Expired as i32);
    let e = games
        .accept_invitation(inv_req(&bob.token, &inv.invitation_id))
        .await
        .unwrap_err();
    assert!(e.message().contains("expired"), "{}", e.message());
    server.stop().await;
}

/// An open invitation is a link anyone signed in may accept; two accepting at once get one game, the
/// loser a clear refusal. Pending invitations per inviter are bounded. A rematch swaps colours.
#[tokio::test]
async fn open_links_races_bounds_and_rematches() {
    let (server, ch) = start().await;
    let mut games = GamesClient::new(ch.clone());
    let ann = guest(&ch, "Ann").await;
    let bob = guest(&ch, "Bob").await;
    let carl = guest(&ch, "Carl").await;
    let inv = games
        .create_invitation(authed(&ann.token, invite("")))
        .await
        .unwrap()
        .into_inner();
    assert!(inv.invitee.is_none());
    let (mut g1, mut g2) = (games.clone(), games.clone());
    let (r1, r2) = tokio::join!(
        g1.accept_invitation(inv_req(&bob.token, &inv.invitation_id)),
        g2.accept_invitation(inv_req(&carl.token, &inv.invitation_id)),
    );
    let won = [&r1, &r2].iter().filter(|r| r.is_ok()).count();
    assert_eq!(won, 1, "exactly one accepter wins: {r1:?} {r2:?}");
    let loser = if r1.is_ok() { &r2 } else { &r1 };
    assert_eq!(loser.as_ref().unwrap_err().code(), Code::FailedPrecondition);
    let game = r1.or(r2).unwrap().into_inner();
    // A rematch after the game: colours swap, the opponent must accept.
    let black = game.black.unwrap();
    let black_token = if black.id == bob.id {
        &bob.token
    } else {
        &carl.token
    };
    games
        .play_move(play(black_token, &game.game_id, "11-15"))
        .await
        .unwrap();
    games
        .play_move(play(&ann.token, &game.game_id, "23-19"))
        .await
        .unwrap();
    games
        .resign(action(&ann.token, &game.game_id))
        .await
        .unwrap();
    let rematch = games
        .offer_rematch(action(&ann.token, &game.game_id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(rematch.rematch_of, game.game_id);
    assert_eq!(rematch.inviter_color, pb::Color::Black as i32);
    let second = games
        .accept_invitation(inv_req(black_token, &rematch.invitation_id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(second.white.unwrap().id, black.id);
    assert_eq!(second.black.unwrap().id, ann.id);
    // At most 20 pending invitations per inviter (open ones here: one per invitee, below).
    for _ in 0..20 {
        games
            .create_invitation(authed(&carl.token, invite("")))
            .await
            .unwrap();
    }
    let e = games
        .create_invitation(authed(&carl.token, invite("")))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted);
    server.stop().await;
}

/// Event streams are bounded per caller like watch streams: one player cannot open thousands.
#[tokio::test]
async fn event_streams_per_caller_are_capped() {
    let mut config = config();
    config.games.max_watchers_per_caller = 3;
    let server = ServiceUnderTest::start(|listener, shutdown| {
        draughts_validation::run(config, listener, shutdown)
    })
    .await;
    let ch = server.channel().await;
    let mut games = GamesClient::new(ch.clone());
    let ann = guest(&ch, "Ann").await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(
            games
                .watch_player_events(authed(&ann.token, pb::WatchPlayerEventsRequest {}))
                .await
                .unwrap()
                .into_inner(),
        );
    }
    let e = games
        .watch_player_events(authed(&ann.token, pb::WatchPlayerEventsRequest {}))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{}", e.message());
    // Another player is not affected; closing one stream frees its place.
    let bob = guest(&ch, "Bob").await;
    games
        .watch_player_events(authed(&bob.token, pb::WatchPlayerEventsRequest {}))
        .await
        .unwrap();
    drop(open.pop());
    let mut freed = false;
    for _ in 0..50 {
        if games
            .watch_player_events(authed(&ann.token, pb::WatchPlayerEventsRequest {}))
            .await
            .is_ok()
        {
            freed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(freed, "a closed stream gives its place back");
    server.stop().await;
}

/// An accepted invitation whose game is not stored (the accepting request died between its two
/// writes, or is still between them while the inviter is told of the acceptance): any read of the id
/// makes the game, so nobody told "accepted" finds it missing. Simulated on a real Redis by deleting
/// the game's record after the acceptance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_accepted_invitation_always_has_its_game() {
    let redis = draughts_testkit::RedisServer::start().unwrap();
    let mut c = config();
    c.backends.redis_url = redis.url();
    c.backends.key_prefix = "consent-heal:".into();
    let server = ServiceUnderTest::start(|listener, shutdown| {
        draughts_validation::run(c, listener, shutdown)
    })
    .await;
    let ch = server.channel().await;
    let mut games = GamesClient::new(ch.clone());
    let ann = guest(&ch, "Ann").await;
    let bob = guest(&ch, "Bob").await;
    let inv = games
        .create_invitation(authed(&ann.token, invite(&bob.id)))
        .await
        .unwrap()
        .into_inner();
    let game = games
        .accept_invitation(inv_req(&bob.token, &inv.invitation_id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(game.game_id, inv.invitation_id);
    let key = format!("consent-heal:kv:game:{{{}}}", game.game_id);
    let deleted = std::process::Command::new("redis-cli")
        .args(["-p", &redis.port().to_string(), "DEL", &key])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&deleted.stdout).trim(),
        "1",
        "{key}"
    );
    // The invitation says accepted; the game is read (by the inviter, who was told) and is there.
    let seen = games
        .get_game(pb::GetGameRequest {
            game_id: game.game_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(seen.game_id, game.game_id);
    let players = [seen.white.unwrap().id, seen.black.unwrap().id];
    assert!(
        players.contains(&ann.id) && players.contains(&bob.id),
        "{players:?}"
    );
    // Made once: a repeated acceptance returns that same game.
    let again = games
        .accept_invitation(inv_req(&bob.token, &inv.invitation_id))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.game_id, game.game_id);
    server.stop().await;
}

/// A game against the computer is casual whatever is asked (ratings never rate it), and every view of
/// it says so; a rated game between two people stays rated.
#[tokio::test]
async fn games_against_the_computer_are_casual_and_say_so() {
    let (server, ch) = start().await;
    let mut games = GamesClient::new(ch.clone());
    let ann = guest(&ch, "Ann").await;
    let bob = guest(&ch, "Bob").await;
    for (white, black) in [(ann.id.as_str(), "ai:2"), ("ai:5", ann.id.as_str())] {
        let asked = create(white, black);
        assert!(asked.rated, "the request asks for a rated game");
        let created = games
            .create_game(authed(&ann.token, asked))
            .await
            .unwrap()
            .into_inner();
        assert!(!created.rated, "CreateGame's answer says casual");
        let read = games
            .get_game(pb::GetGameRequest {
                game_id: created.game_id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(!read.rated, "GetGame says casual");
        let listed = games
            .list_games(pb::ListGamesRequest {
                player_id: ann.id.clone(),
                limit: 0,
                page_token: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        let mine = listed
            .ongoing
            .iter()
            .find(|g| g.game_id == created.game_id)
            .expect("listed");
        assert!(!mine.rated, "ListGames says casual");
        games
            .abort(action(&ann.token, &created.game_id))
            .await
            .unwrap();
    }
    let people =
        draughts_testkit::agreed_game(&ch, &ann.token, &bob.token, create(&ann.id, &bob.id))
            .await
            .unwrap();
    assert!(people.rated, "a rated game between people stays rated");
    server.stop().await;
}

fn invite_ms(invitee: &str, expires_in_ms: u64) -> pb::CreateInvitationRequest {
    let mut req = invite(invitee);
    req.expires_in_ms = expires_in_ms;
    req
}

async fn received(games: &mut GamesClient<Channel>, token: &str) -> Vec<pb::Invitation> {
    games
        .list_invitations(authed(token, pb::ListInvitationsRequest {}))
        .await
        .unwrap()
        .into_inner()
        .received
}

async fn state_of(games: &mut GamesClient<Channel>, token: &str, id: &str) -> pb::Invitation {
    games
        .get_invitation(inv_req(token, id))
        .await
        .unwrap()
        .into_inner()
}

/// The per-sender bound holds under concurrency: 60 CreateInvitation calls from one sender at once on
/// a real redis-server (each step a real round trip, so the calls interleave) let exactly 20 through;
/// the others are RESOURCE_EXHAUSTED, none ABORTED. Before the bound was counted and written in one
/// compare-and-set on the sender's list, 27 of 60 got through.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_concurrent_invitations_from_one_sender_let_exactly_twenty_through() {
    let redis = RedisServer::start().unwrap();
    let mut config = config();
    config.backends.redis_url = redis.url();
    let (server, ch) = start_with(config).await;
    let ann = guest(&ch, "Ann").await;
    let mut invitees = Vec::new();
    for i in 0..30 {
        invitees.push(guest(&ch, &format!("P{i}")).await.id);
    }
    let calls = (0..60).map(|i| {
        let mut games = GamesClient::new(ch.clone());
        // Half named (each invitee twice: the per-pair rule refuses one of each pair at most), half open.
        let invitee = if i % 2 == 0 {
            invitees[i / 2 % 30].clone()
        } else {
            String::new()
        };
        let token = ann.token.clone();
        tokio::spawn(async move {
            games
                .create_invitation(authed(&token, invite(&invitee)))
                .await
        })
    });
    let results: Vec<_> = futures_util::future::join_all(calls)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let codes: Vec<Code> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| e.code()))
        .collect();
    assert_eq!(
        ok, 20,
        "exactly 20 of 60 concurrent invitations pass: {codes:?}"
    );
    assert!(
        codes.iter().all(|c| *c == Code::ResourceExhausted),
        "the others are refused for the bound: {codes:?}"
    );
    let mut games = GamesClient::new(ch.clone());
    let sent = games
        .list_invitations(authed(&ann.token, pb::ListInvitationsRequest {}))
        .await
        .unwrap()
        .into_inner()
        .sent;
    assert_eq!(sent.len(), 20);
    // A cancelled one frees its place at once.
    games
        .cancel_invitation(inv_req(&ann.token, &sent[0].invitation_id))
        .await
        .unwrap();
    games
        .create_invitation(authed(&ann.token, invite("")))
        .await
        .unwrap();
    server.stop().await;
}

/// An invitee holds at most N pending invitations from strangers: the newest is kept, the oldest from a
/// stranger declined TOO_MANY; invitations from a player they have played are neither counted nor
/// dropped. One pending invitation per inviter and invitee.
#[tokio::test]
async fn invitations_from_strangers_are_bounded_per_invitee_newest_kept() {
    let mut config = config();
    config.games.max_pending_from_strangers = 3;
    let (server, ch) = start_with(config).await;
    let mut games = GamesClient::new(ch.clone());
    let vic = guest(&ch, "Victim").await;
    let friend = guest(&ch, "Friend").await;
    // Victim and Friend have played: a game accepted, then resigned before the first move (aborted,
    // archived like any finished game).
    let inv = games
        .create_invitation(authed(&friend.token, invite(&vic.id)))
        .await
        .unwrap()
        .into_inner();
    let game = games
        .accept_invitation(inv_req(&vic.token, &inv.invitation_id))
        .await
        .unwrap()
        .into_inner();
    games
        .resign(action(&friend.token, &game.game_id))
        .await
        .unwrap();
    let archived = async {
        loop {
            let list = games
                .list_games(authed(
                    &vic.token,
                    pb::ListGamesRequest {
                        player_id: vic.id.clone(),
                        limit: 5,
                        page_token: String::new(),
                    },
                ))
                .await
                .unwrap()
                .into_inner();
            if list.recent.iter().any(|g| g.game_id == game.game_id) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), archived)
        .await
        .expect("the finished game is archived");
    let from_friend = games
        .create_invitation(authed(&friend.token, invite(&vic.id)))
        .await
        .unwrap()
        .into_inner();
    // One pending invitation per inviter and invitee.
    let e = games
        .create_invitation(authed(&friend.token, invite(&vic.id)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    let mut strangers = Vec::new();
    for i in 0..5 {
        let s = guest(&ch, &format!("S{i}")).await;
        let inv = games
            .create_invitation(authed(&s.token, invite(&vic.id)))
            .await
            .unwrap()
            .into_inner();
        strangers.push((s, inv.invitation_id));
    }
    // The two oldest strangers' invitations were pushed out, declined TOO_MANY, and their senders
    // may see why; the friend's stands.
    for (s, id) in &strangers[..2] {
        let inv = state_of(&mut games, &s.token, id).await;
        assert_eq!(inv.state, pb::InvitationState::Declined as i32, "{inv:?}");
        assert_eq!(inv.decline_reason, pb::DeclineReason::TooMany as i32);
    }
    let mut listed: Vec<String> = received(&mut games, &vic.token)
        .await
        .into_iter()
        .map(|i| i.invitation_id)
        .collect();
    listed.sort();
    let mut expected: Vec<String> = strangers[2..].iter().map(|(_, id)| id.clone()).collect();
    expected.push(from_friend.invitation_id.clone());
    expected.sort();
    assert_eq!(listed, expected);
    // A declined stranger's place is free again: a new stranger takes it without pushing anyone out.
    games
        .decline_invitation(authed(
            &vic.token,
            pb::DeclineInvitationRequest {
                invitation_id: strangers[2].1.clone(),
                reason: pb::DeclineReason::Later as i32,
            },
        ))
        .await
        .unwrap();
    let late = guest(&ch, "Late").await;
    games
        .create_invitation(authed(&late.token, invite(&vic.id)))
        .await
        .unwrap();
    let inv = state_of(&mut games, &strangers[3].0.token, &strangers[3].1).await;
    assert_eq!(inv.state, pb::InvitationState::Pending as i32);
    assert_eq!(received(&mut games, &vic.token).await.len(), 4);
    // Players cannot claim the server's reason.
    let e = games
        .decline_invitation(authed(
            &vic.token,
            pb::DeclineInvitationRequest {
                invitation_id: strangers[3].1.clone(),
                reason: pb::DeclineReason::TooMany as i32,
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    // Expired invitations leave the count by themselves.
    let quick = guest(&ch, "Quick").await;
    let short = games
        .create_invitation(authed(&quick.token, invite_ms(&friend.id, 200)))
        .await
        .unwrap()
        .into_inner();
    tokio::time::sleep(Duration::from_millis(300)).await;
    games
        .create_invitation(authed(&quick.token, invite_ms(&friend.id, 0)))
        .await
        .expect("the expired invitation no longer stands in the way");
    let inv = state_of(&mut games, &quick.token, &short.invitation_id).await;
    assert_eq!(inv.state, pb::InvitationState::Expired as i32);
    server.stop().await;
}

/// A block list: the blocked one can neither invite nor accept an open invitation of the blocker, nor
/// offer a rematch, and is told only "not available"; pending invitations between them are settled;
/// unblocking restores everything.
#[tokio::test]
async fn a_block_list_is_honoured_by_invitations_acceptances_and_rematches() {
    let (server, ch) = start().await;
    let mut games = GamesClient::new(ch.clone());
    let ann = guest(&ch, "Ann").await;
    let bob = guest(&ch, "Bob").await;
    // A finished game between them (for the rematch), and a pending invitation each way.
    let inv = games
        .create_invitation(authed(&ann.token, invite(&bob.id)))
        .await
        .unwrap()
        .into_inner();
    let game = games
        .accept_invitation(inv_req(&bob.token, &inv.invitation_id))
        .await
        .unwrap()
        .into_inner();
    games
        .resign(action(&bob.token, &game.game_id))
        .await
        .unwrap();
    let from_bob = games
        .create_invitation(authed(&bob.token, invite(&ann.id)))
        .await
        .unwrap()
        .into_inner();
    let to_bob = games
        .create_invitation(authed(&ann.token, invite(&bob.id)))
        .await
        .unwrap()
        .into_inner();
    let open = games
        .create_invitation(authed(&ann.token, invite("")))
        .await
        .unwrap()
        .into_inner();
    let list = games
        .block_player(authed(
            &ann.token,
            pb::BlockPlayerRequest {
                player_id: bob.id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.blocked.len(), 1);
    assert_eq!(list.blocked[0].player_id, bob.id);
    assert_eq!(
        state_of(&mut games, &bob.token, &from_bob.invitation_id)
            .await
            .state,
        pb::InvitationState::Declined as i32
    );
    assert_eq!(
        state_of(&mut games, &ann.token, &to_bob.invitation_id)
            .await
            .state,
        pb::InvitationState::Cancelled as i32
    );
    let not_available = |e: tonic::Status| {
        assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
        assert_eq!(e.message(), "this player is not available");
    };
    not_available(
        games
            .create_invitation(authed(&bob.token, invite(&ann.id)))
            .await
            .unwrap_err(),
    );
    not_available(
        games
            .accept_invitation(inv_req(&bob.token, &open.invitation_id))
            .await
            .unwrap_err(),
    );
    not_available(
        games
            .offer_rematch(action(&bob.token, &game.game_id))
            .await
            .unwrap_err(),
    );
    // The blocker is told what they did.
    let e = games
        .create_invitation(authed(&ann.token, invite(&bob.id)))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    assert!(e.message().contains("you blocked"), "{e:?}");
    let e = games
        .offer_rematch(action(&ann.token, &game.game_id))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);
    // Oneself, the computer, a malformed or unknown id.
    for (id, code) in [
        (ann.id.as_str(), Code::InvalidArgument),
        ("ai:3", Code::InvalidArgument),
        ("guest:\0", Code::InvalidArgument),
        ("guest:nobody", Code::NotFound),
    ] {
        let e = games
            .block_player(authed(
                &ann.token,
                pb::BlockPlayerRequest {
                    player_id: id.into(),
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(e.code(), code, "{id}: {e:?}");
    }
    // Others are not affected: Carl accepts Ann's open invitation.
    let carl = guest(&ch, "Carl").await;
    games
        .accept_invitation(inv_req(&carl.token, &open.invitation_id))
        .await
        .unwrap();
    // Unblocked: invitations work again, and the list is empty.
    let list = games
        .unblock_player(authed(
            &ann.token,
            pb::BlockPlayerRequest {
                player_id: bob.id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(list.blocked.is_empty());
    games
        .create_invitation(authed(&bob.token, invite(&ann.id)))
        .await
        .unwrap();
    let listed = games
        .list_blocked(authed(&ann.token, pb::ListBlockedRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(listed.blocked.is_empty());
    server.stop().await;
}

/// The block list's bound holds under concurrency (one compare-and-set per change, on a real
/// redis-server): with 490 listed, 40 concurrent BlockPlayer calls for different players let exactly
/// 10 in; the rest are RESOURCE_EXHAUSTED.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_block_list_is_bounded_under_concurrency() {
    let redis = RedisServer::start().unwrap();
    let mut config = config();
    config.backends.redis_url = redis.url();
    let (server, ch) = start_with(config).await;
    let mut games = GamesClient::new(ch.clone());
    let ann = guest(&ch, "Ann").await;
    let mut others = Vec::new();
    for i in 0..530 {
        others.push(guest(&ch, &format!("G{i}")).await.id);
    }
    for id in &others[..490] {
        games
            .block_player(authed(
                &ann.token,
                pb::BlockPlayerRequest {
                    player_id: id.clone(),
                },
            ))
            .await
            .unwrap();
    }
    let calls = others[490..].iter().map(|id| {
        let mut games = games.clone();
        let (token, id) = (ann.token.clone(), id.clone());
        tokio::spawn(async move {
            games
                .block_player(authed(&token, pb::BlockPlayerRequest { player_id: id }))
                .await
        })
    });
    let results: Vec<_> = futures_util::future::join_all(calls)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 10);
    assert!(
        results
            .iter()
            .filter_map(|r| r.as_ref().err())
            .all(|e| e.code() == Code::ResourceExhausted)
    );
    let listed = games
        .list_blocked(authed(&ann.token, pb::ListBlockedRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.blocked.len(), 500);
    server.stop().await;
}

/// Games against the computer are a quota per guest (levels 7-8 apart) and per client address, per
/// clock hour: an aborted game counts as created, so the create-abort loop is refused with
/// RESOURCE_EXHAUSTED and `retry-after` (the caller is slowed), while others go on.
#[tokio::test]
async fn computer_games_are_a_quota_and_aborts_count() {
    let mut config = config();
    config.games.ai_games_per_hour_guest = 3;
    config.games.ai_strong_games_per_hour_guest = 1;
    config.games.ai_games_per_hour_address = 6;
    let (server, ch) = start_with(config).await;
    let mut games = GamesClient::new(ch.clone());
    let ann = guest(&ch, "Ann").await;
    let create_abort = |token: String, level: u8| {
        let mut games = games.clone();
        async move {
            // English: Black (the caller) moves first; nobody has moved, so the game may be aborted.
            let game = games
                .create_game(authed(&token, create(&format!("ai:{level}"), "")))
                .await?
                .into_inner();
            games.abort(action(&token, &game.game_id)).await?;
            Ok::<_, tonic::Status>(())
        }
    };
    for _ in 0..3 {
        create_abort(ann.token.clone(), 1).await.unwrap();
    }
    let refused = create_abort(ann.token.clone(), 1).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    let retry_after: u64 = refused
        .metadata()
        .get("retry-after")
        .expect("retry-after")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=3_600).contains(&retry_after), "{retry_after}");
    // Levels 7-8 have a smaller quota of their own for guests.
    let bob = guest(&ch, "Bob").await;
    create_abort(bob.token.clone(), 8).await.unwrap();
    let strong = create_abort(bob.token.clone(), 7).await.unwrap_err();
    assert_eq!(strong.code(), Code::ResourceExhausted);
    assert!(strong.message().contains("levels 7-8"), "{strong:?}");
    create_abort(bob.token.clone(), 2).await.unwrap();
    // Ann's three, Bob's two: the address has one game left this hour, whoever asks.
    let carl = guest(&ch, "Carl").await;
    create_abort(carl.token.clone(), 1).await.unwrap();
    let e = create_abort(carl.token.clone(), 1).await.unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(e.message().contains("address"), "{e:?}");
    // Games between people are not counted.
    let inv = games
        .create_invitation(authed(&carl.token, invite(&bob.id)))
        .await
        .unwrap()
        .into_inner();
    games
        .accept_invitation(inv_req(&bob.token, &inv.invitation_id))
        .await
        .unwrap();
    server.stop().await;
}
