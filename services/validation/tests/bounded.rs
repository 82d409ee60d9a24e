//! Bounded resources of live games: watch caps, watchers sharing one Redis pub/sub connection
//! (also while its connection is killed again and again, without a busy loop), finished games read
//! from the database once their live record has expired and after an embedded restart, ListGames
//! pages, and the cap on a player's open games.

use std::time::Duration;

use draughts_engine::{RuleSet, Variant};
use draughts_proto::convert;
use draughts_proto::pb;
use draughts_proto::pb::games_client::GamesClient;
use draughts_testkit::{Guest, RedisServer, ServiceUnderTest, agreed_game, authed, guest};
use draughts_validation::Config;
use tonic::Code;
use tonic::transport::Channel;

fn config() -> Config {
    let mut c = Config::for_tests();
    c.auth.rate_limit_guest_per_minute = 1_000_000;
    c.auth.rate_limit_anonymous_per_minute = 1_000_000;
    c
}

async fn start(config: Config) -> ServiceUnderTest {
    ServiceUnderTest::start(|listener, shutdown| {
        draughts_validation::run(config, listener, shutdown)
    })
    .await
}

/// A game of international draughts between two guests, started by invitation and acceptance.
async fn game(ch: &Channel, white: &Guest, black: &Guest) -> Result<String, tonic::Status> {
    let request = pb::CreateGameRequest {
        rules: Some(convert::rules_to_wire(RuleSet::new(Variant::International))),
        time_control: Some(pb::TimeControl {
            kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                base_ms: 600_000,
                increment_ms: 0,
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
        rated: false,
        fen: String::new(),
        game_id: String::new(),
        berserk_allowed: false,
    };
    Ok(agreed_game(ch, &white.token, &black.token, request)
        .await?
        .game_id)
}

async fn play(ch: &Channel, who: &Guest, id: &str, text: &str) {
    GamesClient::new(ch.clone())
        .play_move(authed(
            &who.token,
            pb::PlayMoveRequest {
                game_id: id.into(),
                r#move: Some(pb::MoveInput {
                    r#move: Some(pb::move_input::Move::Text(text.into())),
                }),
                expected_ply: None,
            },
        ))
        .await
        .unwrap();
}

async fn resign(ch: &Channel, who: &Guest, id: &str) {
    GamesClient::new(ch.clone())
        .resign(authed(
            &who.token,
            pb::GameActionRequest { game_id: id.into() },
        ))
        .await
        .unwrap();
}

fn watch_req(id: &str) -> pb::WatchGameRequest {
    pb::WatchGameRequest { game_id: id.into() }
}

type Events = tonic::Streaming<pb::GameEvent>;

async fn watch(ch: &Channel, token: Option<&str>, id: &str) -> Result<Events, tonic::Status> {
    let mut games = GamesClient::new(ch.clone());
    let request = match token {
        Some(token) => authed(token, watch_req(id)),
        None => tonic::Request::new(watch_req(id)),
    };
    Ok(games.watch_game(request).await?.into_inner())
}

/// The next event within 10 s.
async fn next(events: &mut Events) -> Option<pb::GameEvent> {
    tokio::time::timeout(Duration::from_secs(10), events.message())
        .await
        .expect("no event within 10 s")
        .unwrap()
}

/// Reads events until one satisfies `want`.
async fn until(events: &mut Events, want: impl Fn(&pb::GameEvent) -> bool) -> pb::GameEvent {
    loop {
        let event = next(events).await.expect("the stream ended first");
        if want(&event) {
            return event;
        }
    }
}

fn is_move(ply: u32) -> impl Fn(&pb::GameEvent) -> bool {
    move |e| matches!(&e.kind, Some(pb::game_event::Kind::MovePlayed(m)) if m.ply == ply)
}

fn is_finished(e: &pb::GameEvent) -> bool {
    matches!(e.kind, Some(pb::game_event::Kind::Finished(_)))
}

/// Behind a proxy whose X-Forwarded-For is trusted, anonymous watchers count per client address (as
/// the rate limits do: IPv6 by its /64), not per proxy: every TCP connection here comes from 127.0.0.1.
#[tokio::test]
async fn anonymous_watchers_behind_a_proxy_count_per_client_address() {
    let mut c = config();
    c.auth.trust_forwarded_for = true;
    c.games.max_watchers_per_caller = 1;
    let server = start(c).await;
    let ch = server.channel().await;
    let (w, b) = (guest(&ch, "W").await, guest(&ch, "B").await);
    let id = game(&ch, &w, &b).await.unwrap();
    let from = |address: &str| {
        let mut request = tonic::Request::new(watch_req(&id));
        request
            .metadata_mut()
            .insert("x-forwarded-for", address.parse().unwrap());
        let mut games = GamesClient::new(ch.clone());
        async move { games.watch_game(request).await.map(|r| r.into_inner()) }
    };
    let _first = from("203.0.113.7").await.unwrap();
    // Another client through the same proxy has a place of its own.
    let _other = from("203.0.113.8").await.unwrap();
    let _v6 = from("2001:db8:1:2::1").await.unwrap();
    // The first client's second watch, and another address of the same IPv6 /64: over the cap.
    for again in ["203.0.113.7", "2001:db8:1:2::99"] {
        let refused = from(again).await.unwrap_err();
        assert_eq!(
            refused.code(),
            Code::ResourceExhausted,
            "{again}: {refused:?}"
        );
    }
    server.stop().await;
}

#[tokio::test]
async fn watch_streams_are_capped_per_caller_and_per_replica() {
    let mut c = config();
    c.games.max_watchers_per_caller = 2;
    c.games.max_watchers = 4;
    let server = start(c).await;
    let ch = server.channel().await;
    let (w, b) = (guest(&ch, "W").await, guest(&ch, "B").await);
    let id = game(&ch, &w, &b).await.unwrap();
    // Anonymous watchers count per address: two, then RESOURCE_EXHAUSTED.
    let first = watch(&ch, None, &id).await.unwrap();
    let _second = watch(&ch, None, &id).await.unwrap();
    let refused = watch(&ch, None, &id).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("open game watches"),
        "{}",
        refused.message()
    );
    // A player has caps of its own.
    let _mine = watch(&ch, Some(&w.token), &id).await.unwrap();
    let _mine_too = watch(&ch, Some(&w.token), &id).await.unwrap();
    let refused = watch(&ch, Some(&w.token), &id).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    // Four are open: the replica is full for everyone.
    let refused = watch(&ch, Some(&b.token), &id).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert!(
        refused.message().contains("this server"),
        "{}",
        refused.message()
    );
    // A closed stream frees its place.
    drop(first);
    let mut again = None;
    for _ in 0..50 {
        match watch(&ch, None, &id).await {
            Ok(events) => {
                again = Some(events);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    assert!(again.is_some(), "the place of a closed watch is free again");
    // Errors are still errors, within the caps.
    drop(again);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let missing = watch(&ch, Some(&b.token), "g0nothere").await.unwrap_err();
    assert_eq!(missing.code(), Code::NotFound);
    let bad = watch(&ch, Some(&b.token), "not a game id!")
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    server.stop().await;
}

/// A raw connection to the test Redis.
async fn admin(redis: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

async fn pubsub_clients(admin: &mut redis::aio::MultiplexedConnection) -> usize {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(admin)
        .await
        .unwrap();
    list.lines().filter(|l| !l.trim().is_empty()).count()
}

async fn commands_processed(admin: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(admin)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap()
}

fn redis_config(redis: &RedisServer) -> Config {
    let mut c = config();
    c.backends.redis_url = redis.url();
    c.games.max_watchers_per_caller = 1_000;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watchers_share_one_pubsub_connection_and_survive_kills_without_a_busy_loop() {
    let redis = RedisServer::start().unwrap();
    let mut admin = admin(&redis).await;
    let server = start(redis_config(&redis)).await;
    let ch = server.channel().await;
    let (w, b) = (guest(&ch, "W").await, guest(&ch, "B").await);
    let (w2, b2) = (guest(&ch, "W2").await, guest(&ch, "B2").await);
    let id = game(&ch, &w, &b).await.unwrap();
    let other = game(&ch, &w2, &b2).await.unwrap();
    let mut watchers = Vec::new();
    for _ in 0..60 {
        watchers.push(watch(&ch, None, &id).await.unwrap());
    }
    let mut others = Vec::new();
    for _ in 0..20 {
        others.push(watch(&ch, None, &other).await.unwrap());
    }
    assert_eq!(
        pubsub_clients(&mut admin).await,
        1,
        "one pub/sub connection for 80 watchers"
    );
    play(&ch, &w, &id, "32-28").await;
    play(&ch, &w2, &other, "31-27").await;
    for events in &mut watchers {
        until(events, is_move(1)).await;
    }
    for events in &mut others {
        until(events, is_move(1)).await;
    }
    // Kill the pub/sub connection every 20 ms for 3 s, while the watchers wait.
    let before = commands_processed(&mut admin).await;
    let until_at = tokio::time::Instant::now() + Duration::from_secs(3);
    let mut kills = 0;
    while tokio::time::Instant::now() < until_at {
        let _: u64 = redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .query_async(&mut admin)
            .await
            .unwrap();
        kills += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let commands = commands_processed(&mut admin).await - before;
    // Ours: `kills` CLIENT KILLs and an INFO. The server's: a few per reconnection (SUBSCRIBE of two
    // channels, and one read per game and Gap), far from a loop (which made 75,000 commands/s).
    assert!(
        commands <= kills + 100,
        "{commands} commands in 3 s ({kills} were our kills)"
    );
    // Once the kills stop the connection comes back (backoff at most 10 s) and moves reach everyone.
    tokio::time::sleep(Duration::from_secs(11)).await;
    assert_eq!(pubsub_clients(&mut admin).await, 1);
    play(&ch, &b, &id, "19-23").await;
    for events in &mut watchers {
        until(events, is_move(2)).await;
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_game_expires_from_redis_and_is_read_from_the_database() {
    let redis = RedisServer::start().unwrap();
    let mut admin = admin(&redis).await;
    let mut c = redis_config(&redis);
    c.games.archived_game_ttl_s = 1;
    let server = start(c).await;
    let ch = server.channel().await;
    let (w, b) = (guest(&ch, "W").await, guest(&ch, "B").await);
    let id = game(&ch, &w, &b).await.unwrap();
    play(&ch, &w, &id, "32-28").await;
    play(&ch, &b, &id, "19-23").await;
    resign(&ch, &w, &id).await;
    let key = format!("test:kv:game:{{{id}}}");
    // Archived: the record gets its TTL, then it is gone from Redis.
    let mut ttl = -1i64;
    for _ in 0..100 {
        ttl = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut admin)
            .await
            .unwrap();
        if ttl > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        ttl > 0 && ttl <= 1_000,
        "the archived record expires (PTTL {ttl})"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let exists: u64 = redis::cmd("EXISTS")
        .arg(&key)
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(exists, 0);
    check_finished_game_reads(&ch, &id, &b.id).await;
    server.stop().await;
}

/// GetGame, ExportPdn, WatchGame and ListGames answer a finished game (with two moves, white
/// resigned).
async fn check_finished_game_reads(ch: &Channel, id: &str, black: &str) {
    let mut games = GamesClient::new(ch.clone());
    let view = games
        .get_game(pb::GetGameRequest { game_id: id.into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(view.moves.len(), 2);
    assert_eq!(view.status.unwrap().outcome, pb::Outcome::BlackWins as i32);
    let pdn = games
        .export_pdn(pb::GetGameRequest { game_id: id.into() })
        .await
        .unwrap()
        .into_inner()
        .pdn;
    assert!(pdn.contains("32-28") && pdn.contains("0-2"), "{pdn}");
    let mut events = watch(ch, None, id).await.unwrap();
    until(&mut events, is_move(2)).await;
    until(&mut events, is_finished).await;
    assert!(
        next(&mut events).await.is_none(),
        "the stream ends after the end"
    );
    let list = games
        .list_games(pb::ListGamesRequest {
            player_id: black.into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.recent.len(), 1);
    assert_eq!(list.recent[0].game_id, id);
}

#[tokio::test]
async fn embedded_restart_reads_finished_games_from_the_sqlite_file() {
    let tmp = tempfile::Builder::new()
        .prefix("draughts-bounded-")
        .tempdir()
        .unwrap();
    let file = tmp.path().join("games.sqlite3");
    let mut c = config();
    c.backends.database_url = format!("sqlite://{}?mode=rwc", file.display());
    let server = start(c.clone()).await;
    let ch = server.channel().await;
    let (w, b) = (guest(&ch, "W").await, guest(&ch, "B").await);
    let id = game(&ch, &w, &b).await.unwrap();
    play(&ch, &w, &id, "32-28").await;
    play(&ch, &b, &id, "19-23").await;
    resign(&ch, &w, &id).await;
    // Wait until it is archived (listed from the database).
    let mut games = GamesClient::new(ch.clone());
    for _ in 0..100 {
        let list = games
            .list_games(pb::ListGamesRequest {
                player_id: b.id.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        if !list.recent.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop().await;
    // A new process: the memory live store is empty, the SQLite file is the same.
    let server = start(c).await;
    let ch = server.channel().await;
    check_finished_game_reads(&ch, &id, &b.id).await;
    server.stop().await;
}

#[tokio::test]
async fn list_games_pages_with_tokens() {
    let server = start(config()).await;
    let ch = server.channel().await;
    let b = guest(&ch, "B").await;
    let mut ids = Vec::new();
    for n in 0..5 {
        let w = guest(&ch, &format!("W{n}")).await;
        let id = game(&ch, &w, &b).await.unwrap();
        resign(&ch, &w, &id).await;
        ids.push(id);
    }
    let ongoing_w = guest(&ch, "O").await;
    let ongoing = game(&ch, &ongoing_w, &b).await.unwrap();
    let mut games = GamesClient::new(ch.clone());
    let mut seen = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    // Archiving is asynchronous: wait until all five are listed.
    for _ in 0..100 {
        let all = games
            .list_games(pb::ListGamesRequest {
                player_id: b.id.clone(),
                limit: 100,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        if all.recent.len() == 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    loop {
        let page = games
            .list_games(pb::ListGamesRequest {
                player_id: b.id.clone(),
                limit: 2,
                page_token: token.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        pages += 1;
        if pages == 1 {
            assert_eq!(page.ongoing.len(), 1);
            assert_eq!(page.ongoing[0].game_id, ongoing);
        } else {
            assert!(
                page.ongoing.is_empty(),
                "ongoing games on the first page only"
            );
        }
        assert!(page.recent.len() <= 2);
        seen.extend(page.recent.iter().map(|s| s.game_id.clone()));
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(pages, 3);
    let mut expected = ids.clone();
    expected.reverse();
    assert_eq!(seen, expected, "newest first, each once");
    let bad = games
        .list_games(pb::ListGamesRequest {
            player_id: b.id.clone(),
            limit: 2,
            page_token: "f1.12.x y".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(bad.code(), Code::InvalidArgument);
    server.stop().await;
}

#[tokio::test]
async fn a_player_has_a_bounded_number_of_open_games() {
    let mut c = config();
    c.games.max_open_games_per_player = 2;
    let server = start(c).await;
    let ch = server.channel().await;
    let victim = guest(&ch, "V").await;
    let mut opponents = Vec::new();
    for n in 0..3 {
        opponents.push(guest(&ch, &format!("O{n}")).await);
    }
    let first = game(&ch, &opponents[0], &victim).await.unwrap();
    game(&ch, &opponents[1], &victim).await.unwrap();
    let refused = game(&ch, &opponents[2], &victim).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused.message().contains("ongoing games"),
        "{}",
        refused.message()
    );
    // A finished game frees a place.
    resign(&ch, &opponents[0], &first).await;
    let mut started = false;
    for _ in 0..100 {
        if game(&ch, &opponents[2], &victim).await.is_ok() {
            started = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(started);
    server.stop().await;
}
