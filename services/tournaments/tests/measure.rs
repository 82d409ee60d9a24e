//! The standings latency of a 1,000-player arena on `redis-server` (opt-in: set
//! `DRAUGHTS_MEASURE_TOURNAMENTS=1`; a measurement, not a check of speed). One replica runs the
//! scheduler (waves every 2 s) and the consumer of `games.finished`.
//!
//! With real Games (the default, `DRAUGHTS_MEASURE_GAMES=real`): Games and Auth (`draughts-validation`)
//! run in this process on the same Redis, the scheduler creates every paired game through Games'
//! gRPC API with a service key, the players are accounts of the test identity provider; the test ends
//! games in progress at a steady rate (White plays 32-28, Black 19-23, then one side resigns through
//! Games, which appends the `games.finished` entry) and times each from the resignation sent to the
//! `result` event its standings write publishes (the write that changes the standings publishes the
//! event in the same atomic step). With `DRAUGHTS_MEASURE_GAMES=instant` Games is faked (creation is
//! instant) and the test appends the finished entries itself, timed from the append.
//!
//! ```sh
//! DRAUGHTS_MEASURE_TOURNAMENTS=1 cargo test --release -p draughts-tournaments --test measure -- --nocapture
//! ```
//! Knobs: `DRAUGHTS_MEASURE_PLAYERS` (1000), `DRAUGHTS_MEASURE_RATE` (results per second, 50),
//! `DRAUGHTS_MEASURE_RESULTS` (1000), `DRAUGHTS_MEASURE_GAMES` (`real` or `instant`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use draughts_proto::contract::finished::{self, EndReason, FinishedV1, Player};
use draughts_proto::contract::tournaments::{self as contract, Event};
use draughts_proto::pb;
use draughts_store::{Bytes, Database, LiveStore, Notice};
use draughts_tournaments::TournamentsResult;
use draughts_tournaments::loops::{self, ConsumerSettings};
use draughts_tournaments::ports::{GamesPort, GrpcPlatform, NewGame, RatingsPort};
use draughts_tournaments::service::{Caller, Settings, TournamentsCore};
use draughts_tournaments::store::Archive;
use draughts_tournaments::terms::{Limits, Terms};
use futures_util::StreamExt;

#[derive(Debug, Default)]
struct InstantGames;

#[async_trait]
impl GamesPort for InstantGames {
    async fn create_game(&self, _: &Terms, _: &NewGame) -> TournamentsResult<()> {
        Ok(())
    }
}

#[derive(Debug, Default)]
struct Ratings;

#[async_trait]
impl RatingsPort for Ratings {
    async fn rating(&self, player: &str, _: &Terms) -> TournamentsResult<i32> {
        Ok(1000 + (player.len() as i32 * 37) % 1000)
    }
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Real Games: `draughts-validation` serving Games and Auth in this process, on `redis_url` with the
/// tournaments' key prefix; returns it, its URL and a service API key (`play`, `admin`, `service`).
async fn real_games(redis_url: &str) -> (draughts_testkit::ServiceUnderTest, String, String) {
    let mut config = draughts_validation::Config::for_tests();
    config.backends.redis_url = redis_url.to_owned();
    config.backends.key_prefix = "m:".into();
    config.auth.rate_limit_player_per_minute = 100_000;
    config.auth.rate_limit_api_key_per_minute = 1_000_000;
    let admin = config.auth.admin_api_key.clone().expect("a test admin key");
    let service = draughts_testkit::ServiceUnderTest::start(move |listener, shutdown| {
        draughts_validation::run(config, listener, shutdown)
    })
    .await;
    let url = service.url();
    let key = pb::auth_client::AuthClient::new(service.channel().await)
        .create_api_key(draughts_testkit::games::authed(
            &admin,
            pb::CreateApiKeyRequest {
                owner: "tournaments".into(),
                scopes: vec![
                    pb::AuthScope::Play as i32,
                    pb::AuthScope::Admin as i32,
                    pb::AuthScope::Service as i32,
                ],
                rate_limit_per_minute: 1_000_000,
                expires_in_secs: 0,
            },
        ))
        .await
        .expect("a service key")
        .into_inner()
        .key;
    (service, url, key)
}

/// An identity-provider token for `player:<sub>`, signed with the test configuration's key.
fn player_token(sub: &str) -> String {
    let key = draughts_auth::AuthConfig::for_tests()
        .jwt_key
        .expect("a test identity provider key");
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &serde_json::json!({"sub": sub, "name": sub, "exp": 4_000_000_000u64}),
        &jsonwebtoken::EncodingKey::from_secret(key.as_bytes()).expect("an HS256 key"),
    )
    .expect("sign a token")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standings_latency_of_a_large_arena() {
    if std::env::var("DRAUGHTS_MEASURE_TOURNAMENTS").is_err() {
        eprintln!("skipped: set DRAUGHTS_MEASURE_TOURNAMENTS=1 to measure");
        return;
    }
    let players = env("DRAUGHTS_MEASURE_PLAYERS", 1000);
    let rate = env("DRAUGHTS_MEASURE_RATE", 50);
    let wanted = env("DRAUGHTS_MEASURE_RESULTS", 1000);
    let real = !matches!(
        std::env::var("DRAUGHTS_MEASURE_GAMES").as_deref(),
        Ok("instant")
    );
    let server = draughts_testkit::RedisServer::start().expect("redis-server");
    let live: Arc<dyn LiveStore> = Arc::new(
        draughts_store::RedisStore::connect(&server.url(), "m:")
            .await
            .unwrap(),
    );
    let db = Database::connect("sqlite::memory:").await.unwrap();
    let (games_service, games): (_, Arc<dyn GamesPort>) = if real {
        let (service, url, key) = real_games(&server.url()).await;
        let platform = GrpcPlatform::new(&url, &url, &key, Vec::new()).unwrap();
        (Some(service), Arc::new(platform))
    } else {
        (None, Arc::new(InstantGames))
    };
    let games_channel = match &games_service {
        Some(s) => Some(s.channel().await),
        None => None,
    };
    let core = TournamentsCore::new(
        live.clone(),
        Archive::new(db).await.unwrap(),
        games,
        Arc::new(Ratings),
        Settings {
            wave_interval: Duration::from_secs(2),
            tick: Duration::from_millis(200),
            lease_ttl: Duration::from_secs(3),
            max_open_per_creator: 3,
            max_open_total: 10_000,
            limits: Limits { min_arena_secs: 60 },
            finished_ttl: Duration::from_secs(60),
        },
        "measure".into(),
    );
    let admin = Caller {
        player: Player::new("key:admin".parse().expect("a player id")),
        account: false,
        admin: true,
    };
    let terms = pb::TournamentTerms {
        name: "Measured arena".into(),
        kind: pb::TournamentKind::Arena as i32,
        rules: Some(pb::RuleSet {
            variant: pb::Variant::International as i32,
            options: None,
        }),
        time_control: Some(pb::TimeControl {
            kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                base_ms: 180_000,
                increment_ms: 0,
            })),
        }),
        rated: true,
        arena_duration_seconds: 3600,
        ..Default::default()
    };
    let t = core.create(&admin, Some(&terms)).await.unwrap();
    let joined = Instant::now();
    let mut tokens = HashMap::new();
    for i in 0..players {
        // Real Games: accounts of the identity provider (their tokens move and resign); faked: guests.
        let id = if real {
            let sub = format!("p{i:05}");
            let token = player_token(&sub);
            // Their first call to the platform makes them known to Games (as joining through the
            // gRPC edge does).
            pb::auth_client::AuthClient::new(games_channel.clone().expect("Games"))
                .who_am_i(draughts_testkit::games::authed(
                    &token,
                    pb::WhoAmIRequest {},
                ))
                .await
                .expect("WhoAmI");
            tokens.insert(format!("player:{sub}"), token);
            format!("player:{sub}")
        } else {
            format!("guest:p{i:05}")
        };
        let caller = Caller {
            player: Player {
                guest: !real,
                ..Player::new(id.parse().expect("a player id"))
            },
            account: real,
            admin: false,
        };
        core.join(&caller, &t.id, "").await.unwrap();
    }
    eprintln!("{players} joins in {:.1?}", joined.elapsed());
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let scheduler = tokio::spawn(loops::run_scheduler(core.clone(), stopped(stop_rx.clone())));
    let consumer = tokio::spawn(loops::run_consumer(
        core.clone(),
        live.clone(),
        ConsumerSettings {
            stream: finished::STREAM.into(),
            group: "tournaments".into(),
            name: "measure".into(),
            batch: 64,
            block: Duration::from_millis(200),
            claim_idle: Duration::from_secs(30),
        },
        stopped(stop_rx),
    ));
    // Results as they are published.
    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let latencies: Arc<Mutex<Vec<Duration>>> = Arc::default();
    let mut events = live
        .subscribe(&contract::events_channel(&t.id))
        .await
        .unwrap();
    let listener = {
        let (sent, latencies) = (sent.clone(), latencies.clone());
        tokio::spawn(async move {
            while let Some(notice) = events.next().await {
                if let Notice::Message(bytes) = notice
                    && let Ok(Event::Result { game_id, .. }) = contract::decode_event(&bytes)
                    && let Some(at) = sent.lock().unwrap().remove(&game_id)
                {
                    latencies.lock().unwrap().push(at.elapsed());
                }
            }
        })
    };
    // Finished entries for games in progress, `rate` a second, each game once.
    let mut ended = std::collections::HashSet::new();
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let started = Instant::now();
    let mut n = 0usize;
    let mut next = Instant::now();
    while n < wanted {
        let (record, _) = core.load(&t.id).await.unwrap().unwrap();
        let Some(pairing) = record
            .ongoing
            .iter()
            .find(|p| p.created && !ended.contains(&p.game_id))
            .cloned()
        else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        ended.insert(pairing.game_id.clone());
        let id = |p: draughts_tournaments::PlayerRef| {
            Player::new(record.entrants[p.0 as usize].player.id.clone())
        };
        let outcome = match n % 3 {
            0 => finished::Outcome::WhiteWins,
            1 => finished::Outcome::BlackWins,
            _ => finished::Outcome::Draw,
        };
        if let Some(channel) = &games_channel {
            // Through Games: a move each, then White (one game in two) or Black resigns.
            let (white, black) = (
                &tokens[id(pairing.white).id.as_str()],
                &tokens[id(pairing.black).id.as_str()],
            );
            let mut client = pb::games_client::GamesClient::new(channel.clone());
            for (token, text) in [(white, "32-28"), (black, "19-23")] {
                client
                    .play_move(draughts_testkit::games::authed(
                        token,
                        pb::PlayMoveRequest {
                            game_id: pairing.game_id.to_string(),
                            r#move: Some(pb::MoveInput {
                                r#move: Some(pb::move_input::Move::Text(text.into())),
                            }),
                            expected_ply: None,
                        },
                    ))
                    .await
                    .unwrap_or_else(|e| panic!("{text} in {}: {e}", pairing.game_id));
            }
            let loser = if n.is_multiple_of(2) { black } else { white };
            tokio::time::sleep_until(next.into()).await;
            sent.lock()
                .unwrap()
                .insert(pairing.game_id.to_string(), Instant::now());
            client
                .resign(draughts_testkit::games::authed(
                    loser,
                    pb::GameActionRequest {
                        game_id: pairing.game_id.to_string(),
                    },
                ))
                .await
                .unwrap_or_else(|e| panic!("resign {}: {e}", pairing.game_id));
        } else {
            let event = FinishedV1 {
                game_id: pairing.game_id.clone(),
                variant: draughts_engine::Variant::International,
                options: String::new(),
                rated: true,
                white: id(pairing.white),
                black: id(pairing.black),
                outcome,
                reason: EndReason::Resignation,
                result: String::new(),
                time_control: None,
                plies: 40,
                finished_at_ms: 0,
                pdn: String::new(),
                traceparent: None,
            };
            tokio::time::sleep_until(next.into()).await;
            sent.lock()
                .unwrap()
                .insert(pairing.game_id.to_string(), Instant::now());
            live.append(finished::STREAM, Bytes::from(finished::encode(&event)))
                .await
                .unwrap();
        }
        n += 1;
        next += interval;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let elapsed = started.elapsed();
    let _ = stop_tx.send(true);
    let _ = scheduler.await;
    let _ = consumer.await;
    listener.abort();
    let (record, _) = core.load(&t.id).await.unwrap().unwrap();
    let mut all = latencies.lock().unwrap().clone();
    all.sort();
    let missing = sent.lock().unwrap().len();
    eprintln!(
        "{} Games; {players} players, {n} results at {rate}/s over {:.1?}: {} timed, {missing} not seen; record {} KB",
        if real { "real" } else { "instant (faked)" },
        elapsed,
        all.len(),
        record.encode().len() / 1024
    );
    if !all.is_empty() {
        eprintln!(
            "{} -> result published: p50 {:.1?}, p90 {:.1?}, p99 {:.1?}, max {:.1?}",
            if real { "resignation sent" } else { "append" },
            percentile(&all, 0.5),
            percentile(&all, 0.9),
            percentile(&all, 0.99),
            all[all.len() - 1]
        );
    }
    assert_eq!(missing, 0, "every result applied");
}
