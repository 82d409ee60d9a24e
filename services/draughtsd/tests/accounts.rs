//! Accounts through gRPC on the one-process platform, on embedded backends and on Redis + PostgreSQL:
//! sign-up (and a guest becoming an account with its games in progress and finished, its rating and
//! invitations), sign-in, refresh rotation and reuse, sign-out, password change, personal tokens,
//! profiles, export, deletion, throttles, and sessions that survive a restart.

use std::time::{Duration, Instant};

use draughts_proto::pb;
use draughts_proto::pb::auth_client::AuthClient;
use draughtsd::Config;
use tonic::transport::Channel;
use tonic::{Code, Request};

fn config(redis_url: &str, database_url: &str) -> Config {
    let mut config = Config::for_tests(redis_url, database_url);
    config.ratings.guest_games = draughts_ratings::config::Policy::Rate;
    // Addresses come from `x-forwarded-for`, so that one test can be several clients.
    config.auth.trust_forwarded_for = true;
    config
}

/// A running platform and a channel to it.
struct Platform {
    channel: Channel,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), draughtsd::StartError>>,
}

impl Platform {
    async fn start(config: Config) -> Platform {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(draughtsd::run(config, listener, async {
            let _ = rx.await;
        }));
        let channel = loop {
            match Channel::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect()
                .await
            {
                Ok(c) => break c,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        Platform {
            channel,
            stop,
            server,
        }
    }

    async fn shut_down(self) {
        let _ = self.stop.send(());
        self.server.await.unwrap().unwrap();
    }
}

/// `msg` from client address `addr`, with `token` as credentials when not empty.
fn from<T>(addr: &str, token: &str, msg: T) -> Request<T> {
    let mut req = Request::new(msg);
    req.metadata_mut()
        .insert("x-forwarded-for", addr.parse().unwrap());
    if !token.is_empty() {
        req.metadata_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
    }
    req
}

fn authed<T>(token: &str, msg: T) -> Request<T> {
    from("192.0.2.1", token, msg)
}

async fn sign_up(
    auth: &mut AuthClient<Channel>,
    addr: &str,
    guest_token: &str,
    username: &str,
    password: &str,
) -> Result<pb::Session, tonic::Status> {
    auth.sign_up(from(
        addr,
        guest_token,
        pb::SignUpRequest {
            username: username.into(),
            password: password.into(),
            display_name: String::new(),
        },
    ))
    .await
    .map(tonic::Response::into_inner)
}

async fn sign_in(
    auth: &mut AuthClient<Channel>,
    addr: &str,
    username: &str,
    password: &str,
) -> Result<pb::Session, tonic::Status> {
    auth.sign_in(from(
        addr,
        "",
        pb::SignInRequest {
            username: username.into(),
            password: password.into(),
        },
    ))
    .await
    .map(tonic::Response::into_inner)
}

async fn who(
    auth: &mut AuthClient<Channel>,
    token: &str,
) -> Result<pb::WhoAmIResponse, tonic::Status> {
    auth.who_am_i(authed(token, pb::WhoAmIRequest {}))
        .await
        .map(tonic::Response::into_inner)
}

async fn refresh(
    auth: &mut AuthClient<Channel>,
    refresh_token: &str,
) -> Result<pb::Session, tonic::Status> {
    auth.refresh_session(authed(
        "",
        pb::RefreshSessionRequest {
            refresh_token: refresh_token.into(),
        },
    ))
    .await
    .map(tonic::Response::into_inner)
}

/// The access token stops working within the replicas' recheck time (at once on this one-process
/// platform, which ended the session itself).
async fn refused_soon(auth: &mut AuthClient<Channel>, token: &str) -> tonic::Status {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match who(auth, token).await {
            Err(e) => return e,
            Ok(_) => {
                assert!(
                    Instant::now() < deadline,
                    "the ended session's token still works"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Every secret the flows handled (passwords, refresh, access and personal tokens).
type Secrets = Vec<String>;

async fn the_account_flows(channel: Channel) -> Secrets {
    let mut auth = AuthClient::new(channel.clone());
    let mut secrets: Secrets = [
        "correct horse 1",
        "battery staple 2",
        "another pass",
        "a new start 3",
    ]
    .map(String::from)
    .to_vec();
    let session = sign_up(&mut auth, "192.0.2.10", "", "Anna_K", "correct horse 1")
        .await
        .unwrap();
    let player = session.player.clone().unwrap();
    assert!(
        player.id.starts_with("user:") && !player.guest,
        "{player:?}"
    );
    assert_eq!(
        (player.display_name.as_str(), session.username.as_str()),
        ("Anna_K", "Anna_K")
    );
    assert!(session.refresh_token.starts_with("rt_"));
    let me = who(&mut auth, &session.access_token).await.unwrap();
    assert_eq!(me.kind, pb::PrincipalKind::Account as i32);
    assert_eq!(
        me.scopes,
        vec![pb::AuthScope::Play as i32, pb::AuthScope::Analysis as i32]
    );
    assert_eq!(me.player.unwrap().id, player.id);
    // Every answer tells the caller where it stands in its rate-limit window.
    let rate = |r: &tonic::metadata::MetadataMap, name: &str| -> u64 {
        r.get(name).unwrap().to_str().unwrap().parse().unwrap()
    };
    let first = auth
        .who_am_i(authed(&session.access_token, pb::WhoAmIRequest {}))
        .await
        .unwrap();
    let second = auth
        .who_am_i(authed(&session.access_token, pb::WhoAmIRequest {}))
        .await
        .unwrap();
    assert_eq!(rate(first.metadata(), "x-ratelimit-limit"), 600);
    // (Unless the minute's window ended between the two calls.)
    if rate(second.metadata(), "x-ratelimit-reset") <= rate(first.metadata(), "x-ratelimit-reset") {
        assert_eq!(
            rate(second.metadata(), "x-ratelimit-remaining") + 1,
            rate(first.metadata(), "x-ratelimit-remaining"),
        );
    }
    assert!((1..=60).contains(&rate(second.metadata(), "x-ratelimit-reset")));

    // Usernames: unique in any letter case; reserved names and bad shapes refused, naming the field.
    let e = sign_up(&mut auth, "192.0.2.10", "", "anna_k", "another pass")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::AlreadyExists, "{e:?}");
    assert_eq!(
        draughts_proto::reason_of(&e),
        Some(pb::ErrorReason::UsernameTaken)
    );
    for (name, password) in [
        ("admin", "password123"),
        ("guest42", "password123"),
        ("ai8", "password123"),
        ("x", "password123"),
        ("bob", "short"),
    ] {
        let e = sign_up(&mut auth, "192.0.2.10", "", name, password)
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{name}: {e:?}");
        assert!(
            e.message().contains("username") || e.message().contains("password"),
            "{}",
            e.message()
        );
    }

    // Unknown username and wrong password: the same answer.
    let unknown = sign_in(&mut auth, "192.0.2.11", "nobody_here", "correct horse 1")
        .await
        .unwrap_err();
    let wrong = sign_in(&mut auth, "192.0.2.11", "anna_k", "wrong horse 1")
        .await
        .unwrap_err();
    assert_eq!(
        (unknown.code(), wrong.code()),
        (Code::Unauthenticated, Code::Unauthenticated)
    );
    assert_eq!(unknown.message(), wrong.message());
    for e in [&unknown, &wrong] {
        assert_eq!(
            draughts_proto::reason_of(e),
            Some(pb::ErrorReason::BadCredentials)
        );
    }
    // Any letter case signs in.
    let second = sign_in(&mut auth, "192.0.2.11", "ANNA_k", "correct horse 1")
        .await
        .unwrap();
    assert_eq!(second.player.as_ref().unwrap().id, player.id);

    // Refresh rotates; the old refresh token used again ends the whole session.
    let rotated = refresh(&mut auth, &second.refresh_token).await.unwrap();
    assert_ne!(rotated.refresh_token, second.refresh_token);
    assert_eq!(
        who(&mut auth, &rotated.access_token)
            .await
            .unwrap()
            .player
            .unwrap()
            .id,
        player.id
    );
    let reused = refresh(&mut auth, &second.refresh_token).await.unwrap_err();
    assert_eq!(reused.code(), Code::Unauthenticated);
    let e = refresh(&mut auth, &rotated.refresh_token)
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated, "the family is revoked");
    let e = refused_soon(&mut auth, &rotated.access_token).await;
    assert!(e.message().contains("session"), "{}", e.message());
    assert_eq!(
        draughts_proto::reason_of(&e),
        Some(pb::ErrorReason::SessionEnded)
    );
    // The first session is untouched.
    who(&mut auth, &session.access_token).await.unwrap();

    // Sign-out ends the session; a second sign-out changes nothing.
    let out = auth
        .sign_out(authed(
            "",
            pb::SignOutRequest {
                refresh_token: session.refresh_token.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(out.signed_out);
    let again = auth
        .sign_out(authed(
            "",
            pb::SignOutRequest {
                refresh_token: session.refresh_token.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(!again.signed_out);
    assert_eq!(
        refresh(&mut auth, &session.refresh_token)
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    refused_soon(&mut auth, &session.access_token).await;

    // A password change ends the other sessions and answers a new one.
    let a = sign_in(&mut auth, "192.0.2.12", "anna_k", "correct horse 1")
        .await
        .unwrap();
    let b = sign_in(&mut auth, "192.0.2.12", "anna_k", "correct horse 1")
        .await
        .unwrap();
    let e = auth
        .change_password(authed(
            &a.access_token,
            pb::ChangePasswordRequest {
                current_password: "not it at all".into(),
                new_password: "battery staple 2".into(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    assert_eq!(
        draughts_proto::reason_of(&e),
        Some(pb::ErrorReason::BadCredentials)
    );
    let c = auth
        .change_password(authed(
            &a.access_token,
            pb::ChangePasswordRequest {
                current_password: "correct horse 1".into(),
                new_password: "battery staple 2".into(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    refused_soon(&mut auth, &b.access_token).await;
    assert_eq!(
        refresh(&mut auth, &b.refresh_token)
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    who(&mut auth, &c.access_token).await.unwrap();
    assert!(
        sign_in(&mut auth, "192.0.2.12", "anna_k", "correct horse 1")
            .await
            .is_err()
    );
    let d = sign_in(&mut auth, "192.0.2.12", "anna_k", "battery staple 2")
        .await
        .unwrap();

    // The display name changes; the id does not.
    let renamed = auth
        .update_account(authed(
            &d.access_token,
            pb::UpdateAccountRequest {
                display_name: "Anna K.".into(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(renamed.player.as_ref().unwrap().id, player.id);
    assert_eq!(renamed.player.unwrap().display_name, "Anna K.");
    for bad in ["", "evil\u{202E}name", "a\u{200B}b"] {
        let e = auth
            .update_account(authed(
                &d.access_token,
                pb::UpdateAccountRequest {
                    display_name: bad.into(),
                },
            ))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{bad:?}");
    }
    let refreshed = refresh(&mut auth, &d.refresh_token).await.unwrap();
    assert_eq!(refreshed.player.clone().unwrap().display_name, "Anna K.");

    // Personal tokens: the scopes chosen among the account's, listed with their last use, revoked.
    let e = auth
        .create_personal_token(authed(
            &refreshed.access_token,
            pb::CreatePersonalTokenRequest {
                label: "admin please".into(),
                scopes: vec![pb::AuthScope::Admin as i32],
                expires_in_secs: 0,
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let created = auth
        .create_personal_token(authed(
            &refreshed.access_token,
            pb::CreatePersonalTokenRequest {
                label: "my bot".into(),
                scopes: vec![pb::AuthScope::Play as i32],
                expires_in_secs: 0,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(created.token.starts_with("dp_") && created.token.len() == 67);
    let created_token = created.token.clone();
    let as_token = who(&mut auth, &created.token).await.unwrap();
    assert_eq!(as_token.player.unwrap().id, player.id);
    assert_eq!(as_token.kind, pb::PrincipalKind::Account as i32);
    assert_eq!(as_token.scopes, vec![pb::AuthScope::Play as i32]);
    let listed = auth
        .list_personal_tokens(authed(
            &refreshed.access_token,
            pb::ListPersonalTokensRequest {},
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(listed.tokens.len(), 1);
    assert_eq!(listed.tokens[0].label, "my bot");
    assert!(
        listed.tokens[0].last_used_at_ms > 0,
        "{:?}",
        listed.tokens[0]
    );
    // A guest may not hold personal tokens.
    let guest = auth
        .create_guest(pb::CreateGuestRequest {
            display_name: "Tess".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let e = auth
        .create_personal_token(authed(
            &guest.token,
            pb::CreatePersonalTokenRequest {
                label: "x".into(),
                scopes: vec![pb::AuthScope::Play as i32],
                expires_in_secs: 0,
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied);
    let revoked = auth
        .revoke_personal_token(authed(
            &refreshed.access_token,
            pb::RevokePersonalTokenRequest {
                token_id: created.info.unwrap().token_id,
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert!(revoked.revoked);
    assert_eq!(
        who(&mut auth, &created.token).await.unwrap_err().code(),
        Code::Unauthenticated
    );

    // Analysis on request: an account has the scope.
    let mut analysis = pb::analysis_client::AnalysisClient::new(channel.clone());
    analysis
        .analyze_position(authed(
            &refreshed.access_token,
            pb::AnalyzePositionRequest {
                source: Some(pb::analyze_position_request::Source::Position(
                    pb::PositionInput {
                        rules: Some(pb::RuleSet {
                            variant: pb::Variant::Russian as i32,
                            options: None,
                        }),
                        fen: String::new(),
                        moves: Vec::new(),
                    },
                )),
                limits: Some(pb::SearchLimits {
                    depth: 2,
                    ..Default::default()
                }),
            },
        ))
        .await
        .unwrap();

    // Profile: public, names the account.
    let mut ratings = pb::ratings_client::RatingsClient::new(channel.clone());
    let profile = ratings
        .get_profile(pb::GetProfileRequest {
            player_id: player.id.clone(),
            recent_games: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(profile.account && profile.since_ms > 0);
    assert_eq!(profile.player.unwrap().display_name, "Anna K.");
    let e = ratings
        .get_profile(pb::GetProfileRequest {
            player_id: "user:00000000000000000000".into(),
            recent_games: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::NotFound);
    assert!(e.message().contains("player"), "{}", e.message());
    let e = ratings
        .get_profile(pb::GetProfileRequest {
            player_id: "user:\0".into(),
            recent_games: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);

    // Deletion: password needed; then nothing signs in, the name is anonymous, the username free.
    let e = auth
        .delete_account(authed(
            &refreshed.access_token,
            pb::DeleteAccountRequest {
                password: "nope nope".into(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    let deleted = auth
        .delete_account(authed(
            &refreshed.access_token,
            pb::DeleteAccountRequest {
                password: "battery staple 2".into(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(deleted.player_id, player.id);
    refused_soon(&mut auth, &refreshed.access_token).await;
    assert_eq!(
        refresh(&mut auth, &refreshed.refresh_token)
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    assert_eq!(
        sign_in(&mut auth, "192.0.2.13", "anna_k", "battery staple 2")
            .await
            .unwrap_err()
            .code(),
        Code::Unauthenticated
    );
    let profile = ratings
        .get_profile(pb::GetProfileRequest {
            player_id: player.id.clone(),
            recent_games: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(profile.player.unwrap().display_name, "Deleted player");
    let reborn = sign_up(&mut auth, "192.0.2.13", "", "anna_k", "a new start 3")
        .await
        .unwrap();
    assert_ne!(reborn.player.as_ref().unwrap().id, player.id);
    for s in [
        &session, &second, &rotated, &a, &b, &c, &d, &refreshed, &reborn,
    ] {
        secrets.push(s.refresh_token.clone());
        secrets.push(s.access_token.clone());
    }
    secrets.push(created_token);
    secrets
}

/// A guest plays (one game finished and rated, one in progress, one invitation pending), then signs
/// up: everything is the account's, and the account plays the game on.
async fn a_guest_becomes_an_account(channel: Channel) -> Secrets {
    let mut auth = AuthClient::new(channel.clone());
    let mut games = pb::games_client::GamesClient::new(channel.clone());
    let mut guest = async |name: &str| {
        auth.create_guest(pb::CreateGuestRequest {
            display_name: name.into(),
        })
        .await
        .unwrap()
        .into_inner()
    };
    let gus = guest("Gus").await;
    let hal = guest("Hal").await;
    let ivy = guest("Ivy").await;
    let gus_id = gus.player.clone().unwrap().id;
    let hal_id = hal.player.clone().unwrap().id;
    let new_game = |white: &str, black: &str| pb::CreateGameRequest {
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
            id: white.into(),
            ..Default::default()
        }),
        black: Some(pb::Player {
            id: black.into(),
            ..Default::default()
        }),
        rated: true,
        fen: String::new(),
        game_id: String::new(),
        berserk_allowed: false,
    };
    let play = |token: &str, game_id: &str, mv: &str| {
        authed(
            token,
            pb::PlayMoveRequest {
                game_id: game_id.into(),
                r#move: Some(pb::MoveInput {
                    r#move: Some(pb::move_input::Move::Text(mv.into())),
                }),
                expected_ply: None,
            },
        )
    };
    let finished =
        draughts_testkit::agreed_game(&channel, &gus.token, &hal.token, new_game(&gus_id, &hal_id))
            .await
            .unwrap();
    games
        .play_move(play(&gus.token, &finished.game_id, "c3-d4"))
        .await
        .unwrap();
    games
        .play_move(play(&hal.token, &finished.game_id, "f6-e5"))
        .await
        .unwrap();
    games
        .resign(authed(
            &hal.token,
            pb::GameActionRequest {
                game_id: finished.game_id.clone(),
            },
        ))
        .await
        .unwrap();
    let ongoing =
        draughts_testkit::agreed_game(&channel, &hal.token, &gus.token, new_game(&hal_id, &gus_id))
            .await
            .unwrap();
    games
        .play_move(play(&hal.token, &ongoing.game_id, "c3-d4"))
        .await
        .unwrap();
    let invitation = games
        .create_invitation(authed(
            &ivy.token,
            pb::CreateInvitationRequest {
                invitee_id: gus_id.clone(),
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
                ..Default::default()
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let mut ratings = pb::ratings_client::RatingsClient::new(channel.clone());
    let category = Some(pb::RatingCategory {
        variant: pb::Variant::Russian as i32,
        speed: 0,
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    while ratings
        .get_rating(pb::GetRatingRequest {
            player_id: gus_id.clone(),
            category,
        })
        .await
        .unwrap()
        .into_inner()
        .games
        != 1
    {
        assert!(Instant::now() < deadline, "the guest's game was not rated");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }

    let session = sign_up(
        &mut auth,
        "192.0.2.20",
        &gus.token,
        "gus_plays",
        "guessing game 9",
    )
    .await
    .unwrap();
    assert_eq!(session.adopted_guest_id, gus_id);
    let account = session.player.clone().unwrap().id;
    assert!(account.starts_with("user:"));
    // The guest's token is retired.
    let e = who(&mut auth, &gus.token).await.unwrap_err();
    assert_eq!(e.code(), Code::Unauthenticated);
    // An account cannot sign up again over itself.
    let e = sign_up(
        &mut auth,
        "192.0.2.20",
        &session.access_token,
        "gus_again",
        "guessing game 9",
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition);

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = games
            .list_games(pb::ListGamesRequest {
                player_id: account.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        let rating = ratings
            .get_rating(pb::GetRatingRequest {
                player_id: account.clone(),
                category,
            })
            .await
            .unwrap()
            .into_inner();
        let has_finished = listed.recent.iter().any(|g| g.game_id == finished.game_id);
        let has_ongoing = listed.ongoing.iter().any(|g| g.game_id == ongoing.game_id);
        if has_finished && has_ongoing && rating.games == 1 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the guest's games did not move: {has_finished} {has_ongoing} {}",
            rating.games
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The account plays the game in progress on, under its own name.
    let view = games
        .play_move(play(&session.access_token, &ongoing.game_id, "f6-e5"))
        .await
        .unwrap()
        .into_inner();
    let black = view.black.unwrap();
    assert_eq!(
        (black.id.as_str(), black.display_name.as_str(), black.guest),
        (account.as_str(), "gus_plays", false)
    );
    // The invitation waits for the account now.
    let pending = games
        .list_invitations(authed(&session.access_token, pb::ListInvitationsRequest {}))
        .await
        .unwrap()
        .into_inner();
    assert!(
        pending
            .received
            .iter()
            .any(|i| i.invitation_id == invitation.invitation_id),
        "{pending:?}"
    );
    // Its data, in one call: the finished game as PDN.
    let export = auth
        .export_account_data(authed(
            &session.access_token,
            pb::ExportAccountDataRequest {},
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(export.games, 1);
    assert!(export.pdn.contains("[Result"), "{}", export.pdn);
    assert_eq!(
        export.account.unwrap().adopted_guest_ids,
        vec![gus_id.clone()]
    );
    // Exports are bounded per caller: ten an hour.
    for _ in 1..10 {
        auth.export_account_data(authed(
            &session.access_token,
            pb::ExportAccountDataRequest {},
        ))
        .await
        .unwrap();
    }
    let e = auth
        .export_account_data(authed(
            &session.access_token,
            pb::ExportAccountDataRequest {},
        ))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted);
    assert!(e.metadata().get("retry-after").is_some());
    assert_eq!(
        draughts_proto::reason_of(&e),
        Some(pb::ErrorReason::TooManyAttempts)
    );
    // The profile lists the rated game.
    let profile = ratings
        .get_profile(pb::GetProfileRequest {
            player_id: account.clone(),
            recent_games: 5,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(profile.ratings.len(), 1);
    assert_eq!(profile.wins, 1);
    assert_eq!(profile.recent_games[0].game_id, finished.game_id);

    // Deleted: its games keep the id and show the anonymous name, archived ones (view and PDN) and
    // ongoing ones alike.
    auth.delete_account(authed(
        &session.access_token,
        pb::DeleteAccountRequest {
            password: "guessing game 9".into(),
        },
    ))
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let done = games
            .get_game(authed(
                &hal.token,
                pb::GetGameRequest {
                    game_id: finished.game_id.clone(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let live = games
            .get_game(authed(
                &hal.token,
                pb::GetGameRequest {
                    game_id: ongoing.game_id.clone(),
                },
            ))
            .await
            .unwrap()
            .into_inner();
        let white = done.white.unwrap();
        let black = live.black.unwrap();
        if white.display_name == "Deleted player" && black.display_name == "Deleted player" {
            assert_eq!(
                (white.id.as_str(), black.id.as_str()),
                (account.as_str(), account.as_str())
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the deleted account's games kept its name: {white:?} {black:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let pdn = games
        .export_pdn(authed(
            &hal.token,
            pb::GetGameRequest {
                game_id: finished.game_id.clone(),
            },
        ))
        .await
        .unwrap()
        .into_inner()
        .pdn;
    assert!(
        pdn.contains("Deleted player") && !pdn.contains("\"Gus\""),
        "{pdn}"
    );
    vec![
        "guessing game 9".into(),
        session.refresh_token,
        session.access_token,
    ]
}

/// 1,000 wrong passwords from one address: refused with `retry-after` long before, no password
/// hashed for the refused ones, and the owner signs in from another address meanwhile.
async fn sign_in_throttles(channel: Channel) {
    let mut auth = AuthClient::new(channel.clone());
    sign_up(
        &mut auth,
        "192.0.2.30",
        "",
        "target_one",
        "the real password",
    )
    .await
    .unwrap();
    let attacker = "203.0.113.7";
    let started = Instant::now();
    let mut refused = 0;
    let mut retry_after = None;
    for i in 0..1_000 {
        match sign_in(
            &mut auth,
            attacker,
            "target_one",
            &format!("guess number {i}"),
        )
        .await
        {
            Err(e) if e.code() == Code::ResourceExhausted => {
                refused += 1;
                retry_after = e
                    .metadata()
                    .get("retry-after")
                    .map(|v| v.to_str().unwrap().to_owned());
            }
            Err(e) => assert_eq!(e.code(), Code::Unauthenticated, "{e:?}"),
            Ok(_) => panic!("a guess signed in"),
        }
    }
    // At most 10 attempts a window reach the password check; the anonymous per-minute limit of the
    // address refuses most of the rest even earlier.
    assert!(refused >= 990, "{refused} refused");
    let retry: u64 = retry_after.expect("retry-after metadata").parse().unwrap();
    assert!((1..=300).contains(&retry), "{retry}");
    eprintln!(
        "1,000 attempts from one address: {refused} refused, {:?}",
        started.elapsed()
    );
    // The owner, elsewhere, is not locked out.
    sign_in(&mut auth, "198.51.100.9", "target_one", "the real password")
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_on_embedded_backends() {
    let platform = Platform::start(config("memory://", "sqlite::memory:")).await;
    the_account_flows(platform.channel.clone()).await;
    a_guest_becomes_an_account(platform.channel.clone()).await;
    sign_in_throttles(platform.channel.clone()).await;
    platform.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_on_redis_and_postgres() {
    let redis =
        draughts_testkit::RedisServer::start().expect("redis-server (install: redis-server)");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres (install: postgresql)");
    let platform = Platform::start(config(&redis.url(), &pg.url())).await;
    the_account_flows(platform.channel.clone()).await;
    a_guest_becomes_an_account(platform.channel.clone()).await;
    platform.shut_down().await;
}

/// The default install (no token secret given) keeps its signing keys and sessions in its database
/// file: a restart signs nobody out, and the file is private to its owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_survive_a_restart_of_the_default_install() {
    let tmp = tempfile::Builder::new()
        .prefix("draughts-accounts-")
        .tempdir()
        .unwrap();
    let file = tmp.path().join("platform.sqlite3");
    let url = format!("sqlite://{}?mode=rwc", file.display());
    let default_install = || {
        let mut config = config("memory://", &url);
        config.auth.token_secret = String::new();
        config
    };
    let first = Platform::start(default_install()).await;
    let mut auth = AuthClient::new(first.channel.clone());
    let session = sign_up(&mut auth, "192.0.2.40", "", "stays_on", "through restarts")
        .await
        .unwrap();
    let guest = auth
        .create_guest(pb::CreateGuestRequest {
            display_name: "Rae".into(),
        })
        .await
        .unwrap()
        .into_inner();
    first.shut_down().await;
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
    }

    let second = Platform::start(default_install()).await;
    let mut auth = AuthClient::new(second.channel.clone());
    let me = who(&mut auth, &session.access_token).await.unwrap();
    assert_eq!(me.player.unwrap().id, session.player.as_ref().unwrap().id);
    who(&mut auth, &guest.token).await.unwrap();
    let refreshed = refresh(&mut auth, &session.refresh_token).await.unwrap();
    who(&mut auth, &refreshed.access_token).await.unwrap();
    sign_in(&mut auth, "192.0.2.40", "stays_on", "through restarts")
        .await
        .unwrap();
    second.shut_down().await;
}
