//! Reads check ids as writes do, and NOT_FOUND names what was not found: malformed ids (a NUL byte,
//! white space, an unknown kind) are INVALID_ARGUMENT on every read of Games, never INTERNAL and never
//! an ERROR in the log; an unknown player, game or invitation is NOT_FOUND saying which it was.
//!
//! One test in this binary: it counts the ERROR events of the whole process (the server runs in it).

use std::sync::atomic::{AtomicUsize, Ordering};

use draughts_engine::{RuleSet, Variant};
use draughts_proto::convert;
use draughts_proto::pb;
use draughts_proto::pb::auth_client::AuthClient;
use draughts_proto::pb::games_client::GamesClient;
use draughts_testkit::{ServiceUnderTest, authed};
use draughts_validation::Config;
use tonic::Code;

/// ERROR events seen in this process.
static ERRORS: AtomicUsize = AtomicUsize::new(0);

/// A subscriber that only counts ERROR events.
struct CountErrors;

impl tracing::Subscriber for CountErrors {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() == tracing::Level::ERROR
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::ERROR {
            ERRORS.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Malformed as player ids and as game ids.
const MALFORMED: [&str; 3] = ["guest:ab\0cd", "g\0", "guest:a b"];

#[track_caller]
fn assert_invalid<T: std::fmt::Debug>(what: &str, bad: &str, answer: Result<T, tonic::Status>) {
    let e = answer.expect_err(what);
    assert_eq!(
        e.code(),
        Code::InvalidArgument,
        "{what} {bad:?}: {}",
        e.message()
    );
    assert!(!e.message().contains('\0'), "{what}: {}", e.message());
}

#[tokio::test]
async fn reads_refuse_malformed_ids_and_not_found_names_the_missing_thing() {
    tracing::subscriber::set_global_default(CountErrors).expect("the only subscriber");
    // An ERROR is counted (the subscriber works) ...
    tracing::error!("counted");
    assert_eq!(ERRORS.swap(0, Ordering::SeqCst), 1);

    let mut config = Config::for_tests();
    config.auth.rate_limit_guest_per_minute = 1_000_000;
    config.auth.rate_limit_anonymous_per_minute = 1_000_000;
    let server = ServiceUnderTest::start(|listener, shutdown| {
        draughts_validation::run(config, listener, shutdown)
    })
    .await;
    let channel = server.channel().await;
    let mut games = GamesClient::new(channel.clone());
    let ann = AuthClient::new(channel)
        .create_guest(pb::CreateGuestRequest {
            display_name: "Ann".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let ann_id = ann.player.unwrap().id;

    // No known kind: a malformed player id (though a well-formed game id).
    for bad in MALFORMED.into_iter().chain(["somebody"]) {
        let answer = games
            .list_games(pb::ListGamesRequest {
                player_id: bad.into(),
                limit: 0,
                page_token: String::new(),
            })
            .await;
        assert_invalid("ListGames", bad, answer);
    }
    for bad in MALFORMED {
        let answer = games
            .get_game(pb::GetGameRequest {
                game_id: bad.into(),
            })
            .await;
        assert_invalid("GetGame", bad, answer);
        let answer = games
            .export_pdn(pb::GetGameRequest {
                game_id: bad.into(),
            })
            .await;
        assert_invalid("ExportPdn", bad, answer);
        let answer = games
            .watch_game(pb::WatchGameRequest {
                game_id: bad.into(),
            })
            .await;
        assert_invalid("WatchGame", bad, answer.map(|_| ()));
        let answer = games
            .get_invitation(authed(
                &ann.token,
                pb::InvitationRequest {
                    invitation_id: bad.into(),
                    accept_key: String::new(),
                },
            ))
            .await;
        assert_invalid("GetInvitation", bad, answer);
    }
    // A well-formed player id with no games is an empty list, not an error.
    let listed = games
        .list_games(pb::ListGamesRequest {
            player_id: "guest:0123456789abcdef0123456789abcdef".into(),
            limit: 0,
            page_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(listed.ongoing.is_empty() && listed.recent.is_empty());

    // NOT_FOUND says what was not found.
    let unknown_player = "guest:0123456789abcdef0123456789abcdef";
    let e = games
        .create_game(authed(
            &ann.token,
            pb::CreateGameRequest {
                rules: Some(convert::rules_to_wire(RuleSet::new(Variant::English))),
                time_control: None,
                white: Some(pb::Player {
                    id: ann_id.clone(),
                    ..Default::default()
                }),
                black: Some(pb::Player {
                    id: unknown_player.into(),
                    ..Default::default()
                }),
                rated: false,
                fen: String::new(),
                game_id: String::new(),
                berserk_allowed: false,
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert_eq!(
        e.message(),
        format!("no player with id '{unknown_player}' (black)")
    );
    let e = games
        .get_game(pb::GetGameRequest {
            game_id: "g0123456789abcdef".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::NotFound, "no game with id 'g0123456789abcdef'")
    );
    let e = games
        .get_invitation(authed(
            &ann.token,
            pb::InvitationRequest {
                invitation_id: "g0123456789abcdef".into(),
                accept_key: String::new(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code(), e.message()),
        (Code::NotFound, "no invitation with id 'g0123456789abcdef'")
    );

    assert_eq!(
        ERRORS.load(Ordering::SeqCst),
        0,
        "no ERROR logged for a client's malformed or unknown id"
    );
    server.stop().await;
}
