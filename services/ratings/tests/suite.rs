//! ONE behavioural suite of the ratings service, written once and run on both backends:
//! the embedded mode (memory live store + SQLite file) and the deployed mode (a real `redis-server` and
//! PostgreSQL started by the test on free ports; a fresh database and key prefix per check).
//!
//! Checks: stream results rated once under duplicate delivery; reordered delivery; a consumer killed
//! mid-batch (before and after its commit) loses and doubles nothing; a consumer task aborted at random
//! moments; leaderboard paging under concurrent updates; the policies (casual, computer, guest, house
//! rules, aborted); fixed rating periods (Glickman's scheme); deviation growth with inactivity;
//! malformed entries dead-lettered; history paging; games whose stream entries were lost rated once
//! from what the games service lists (the reconciler).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use draughts_engine::Variant;
use draughts_proto::contract::finished;
use draughts_proto::ids::PlayerId;
use draughts_ratings::category::{Category, Speed, TimeControl};
use draughts_ratings::event::{FINISHED_STREAM, FinishedGame, Outcome, Player, Source};
use draughts_ratings::games_feed::{FeedEntry, FeedQuery, FinishedFeed};
use draughts_ratings::glicko::{self, Game};
use draughts_ratings::reconcile::Reconciler;
use draughts_ratings::{ComputerPolicy, Consumer, PeriodMode, Policy, RatingsConfig, RatingsCore};
use draughts_store::sqlx::{self, Row};
use draughts_store::{Database, LiveStore, MemoryStore, RedisStore};

/// The backends one check runs on.
#[derive(Clone)]
struct Backend {
    live: Arc<dyn LiveStore>,
    db: Database,
}

type CheckFuture = Pin<Box<dyn Future<Output = ()> + Send>>;
type Check = fn(Backend) -> CheckFuture;

const CHECKS: &[(&str, Check)] = &[
    ("stream_games_are_rated_once", |b| {
        Box::pin(stream_games_are_rated_once(b))
    }),
    ("reordered_delivery", |b| Box::pin(reordered_delivery(b))),
    ("consumer_killed_mid_batch_loses_nothing", |b| {
        Box::pin(consumer_killed_mid_batch_loses_nothing(b))
    }),
    ("consumer_aborted_at_random_moments", |b| {
        Box::pin(consumer_aborted_at_random_moments(b))
    }),
    ("leaderboard_paging_under_concurrent_updates", |b| {
        Box::pin(leaderboard_paging_under_concurrent_updates(b))
    }),
    ("policies", |b| Box::pin(policies(b))),
    ("a_pair_s_games_are_rated_up_to_the_daily_limit", |b| {
        Box::pin(a_pair_s_games_are_rated_up_to_the_daily_limit(b))
    }),
    ("fixed_periods_rate_games_together", |b| {
        Box::pin(fixed_periods_rate_games_together(b))
    }),
    ("inactivity_grows_deviation", |b| {
        Box::pin(inactivity_grows_deviation(b))
    }),
    ("malformed_entries_are_dead_lettered", |b| {
        Box::pin(malformed_entries_are_dead_lettered(b))
    }),
    ("history_pages", |b| Box::pin(history_pages(b))),
    ("games_lost_from_the_stream_are_reconciled", |b| {
        Box::pin(games_lost_from_the_stream_are_reconciled(b))
    }),
    ("the_longest_ids_are_rated", |b| {
        Box::pin(the_longest_ids_are_rated(b))
    }),
    ("bots_are_rated_apart", |b| {
        Box::pin(bots_are_rated_apart(b))
    }),
];

fn bot(id: &str) -> Player {
    Player {
        bot: true,
        ..side(id)
    }
}

/// BOTs' ratings apart: the mark comes from the `games.finished` entry (the contract's `bot`), is kept
/// per player (`rating_bots`) and on every rating row of a bot, old rows too; people's and bots'
/// leaderboards never mix, ranks count within one, a page token of one is refused by the other;
/// rows stored before the mark existed still read (as people's until the bot's next game); the
/// policy for a bot against a person: rated (lichess), bot-only or skipped; fixed periods mark too.
async fn bots_are_rated_apart(b: Backend) {
    // Rows of the schema before bots (migrations up to 1004): a person and a bot, two categories.
    let before: Vec<_> = draughts_ratings::domain::MIGRATIONS
        .iter()
        .filter(|m| m.version < 1005)
        .cloned()
        .collect();
    b.db.migrate(&before).await.unwrap();
    let now = 2_000_000;
    for (category, player, rating) in [
        ("english", "player:old", 1600.0),
        ("english", "player:oldbot", 1700.0),
        ("international", "player:oldbot", 1650.0),
    ] {
        sqlx::query(
            "INSERT INTO ratings (category, player_id, rating, deviation, volatility, games, wins, draws, \
             losses, rated_at_ms, last_game_at_ms, established_until_ms) \
             VALUES ($1, $2, $3, 60.0, 0.06, 30, 15, 0, 15, 1000, 1000, $4)",
        )
        .bind(category)
        .bind(player)
        .bind(rating)
        .bind(i64::MAX)
        .execute(b.db.pool())
        .await
        .unwrap();
    }
    let mut config = test_config();
    config.provisional_deviation = 340.0;
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    // The old rows read, as people's.
    let old = core.rating("player:oldbot", ENGLISH, now).await.unwrap();
    assert_eq!((old.games, old.bot), (30, false));
    let people = |core: &RatingsCore, category| {
        let core = core.clone();
        async move {
            let page = core
                .leaderboard(category, false, 50, "", now)
                .await
                .unwrap();
            page.entries
                .into_iter()
                .map(|(rank, v)| (rank, v.player_id, v.bot))
                .collect::<Vec<_>>()
        }
    };
    let bots = |core: &RatingsCore, category| {
        let core = core.clone();
        async move {
            let page = core.leaderboard(category, true, 50, "", now).await.unwrap();
            page.entries
                .into_iter()
                .map(|(rank, v)| (rank, v.player_id, v.bot))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(people(&core, ENGLISH).await.len(), 2);
    assert!(bots(&core, ENGLISH).await.is_empty());

    // The mark travels in the stream entry (the contract), from the server's data.
    let mut g1 = game("b1", "player:pa", "player:pb", Outcome::WhiteWins, 1_000);
    let mut g2 = game("b2", "bot:ba", "bot:bb", Outcome::WhiteWins, 1_001);
    g2.white = bot("bot:ba");
    g2.black = bot("bot:bb");
    let mut g3 = game("b3", "player:pa", "bot:ba", Outcome::Draw, 1_002);
    g3.black = bot("bot:ba");
    let mut g4 = game("b4", "player:oldbot", "bot:bb", Outcome::WhiteWins, 1_003);
    g4.white = bot("player:oldbot");
    let games: Vec<FinishedGame> = [&g1, &g2, &g3, &g4]
        .into_iter()
        .map(|g| FinishedGame::from_event(&event(g)).unwrap())
        .collect();
    assert!(games[1].white.bot && games[1].black.bot && !games[0].white.bot);
    let report = core.apply(&games, Source::Stream, now).await.unwrap();
    assert_eq!((report.recorded, report.skipped), (4, 0));
    // A bot against a person is rated on both sides by default (lichess).
    let pa = core.rating("player:pa", ENGLISH, now).await.unwrap();
    assert_eq!((pa.games, pa.draws, pa.bot), (2, 1, false));
    let ba = core.rating("bot:ba", ENGLISH, now).await.unwrap();
    assert_eq!((ba.games, ba.bot), (2, true));

    let people_board = people(&core, ENGLISH).await;
    let names: Vec<&str> = people_board.iter().map(|(_, p, _)| p.as_str()).collect();
    assert_eq!(names.len(), 3, "{people_board:?}");
    assert!(names.contains(&"player:old") && names.contains(&"player:pa"));
    assert!(names.contains(&"player:pb"));
    assert!(people_board.iter().all(|(_, _, bot)| !bot));
    let bot_board = bots(&core, ENGLISH).await;
    let names: Vec<&str> = bot_board.iter().map(|(_, p, _)| p.as_str()).collect();
    assert_eq!(
        names,
        ["player:oldbot", "bot:ba", "bot:bb"],
        "{bot_board:?}"
    );
    assert!(bot_board.iter().all(|(_, _, bot)| *bot));
    assert_eq!(
        bot_board
            .iter()
            .map(|(rank, _, _)| *rank)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    // The old bot's row of another category is marked too (its next game marked all its rows).
    let intl = Category {
        variant: Variant::International,
        speed: None,
    };
    assert!(people(&core, intl).await.is_empty());
    assert_eq!(bots(&core, intl).await.len(), 1);
    // Ranks count within one leaderboard.
    let pb = core.rating("player:pb", ENGLISH, now).await.unwrap();
    let (best_person, _, _) = &people_board[0];
    assert_eq!(*best_person, 1);
    let ba_rank = core.rank(&ba, now).await.unwrap().unwrap();
    assert_eq!(ba_rank, 2);
    assert!(core.rank(&pb, now).await.unwrap().unwrap() <= 3);
    // A page token belongs to its leaderboard.
    let page = core.leaderboard(ENGLISH, true, 1, "", now).await.unwrap();
    let token = page.next_page_token.unwrap();
    let err = core
        .leaderboard(ENGLISH, false, 1, &token, now)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("another leaderboard"), "{err}");
    let next = core
        .leaderboard(ENGLISH, true, 1, &token, now)
        .await
        .unwrap();
    assert_eq!(next.entries[0].0, 2);
    assert_eq!(next.entries[0].1.player_id, "bot:ba");

    // bot-only: the person's rating stays, the bot's moves; skip: neither.
    config.bot_games = draughts_ratings::BotPolicy::BotOnly;
    let bot_only = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    g1 = game("b5", "player:pb", "bot:bb", Outcome::BlackWins, 1_004);
    g1.black = bot("bot:bb");
    let bb_before = bot_only.rating("bot:bb", ENGLISH, now).await.unwrap();
    bot_only
        .apply(&[g1.clone()], Source::Stream, now)
        .await
        .unwrap();
    assert_eq!(
        bot_only
            .rating("player:pb", ENGLISH, now)
            .await
            .unwrap()
            .games,
        pb.games
    );
    let bb = bot_only.rating("bot:bb", ENGLISH, now).await.unwrap();
    assert_eq!(bb.games, bb_before.games + 1);
    config.bot_games = draughts_ratings::BotPolicy::Skip;
    let skip = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    g1.game_id = "b6".into();
    let report = skip.apply(&[g1], Source::Stream, now).await.unwrap();
    assert_eq!((report.recorded, report.skipped), (0, 1));
    // Two bots are rated whatever the policy.
    g2.game_id = "b7".into();
    assert_eq!(
        skip.apply(&[g2], Source::Stream, now)
            .await
            .unwrap()
            .recorded,
        1
    );

    // Fixed periods: the rows written when the period is rated carry the mark too.
    config.bot_games = draughts_ratings::BotPolicy::Rate;
    config.periods = PeriodMode::Fixed;
    let fixed = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let mut g = game("b8", "bot:fixed", "player:fixed", Outcome::WhiteWins, 1_005);
    g.white = bot("bot:fixed");
    g.variant = Variant::Frisian;
    assert_eq!(
        fixed
            .apply(&[g], Source::Stream, now)
            .await
            .unwrap()
            .pending,
        1
    );
    assert_eq!(fixed.close_due_periods(u64::MAX / 4).await.unwrap(), 1);
    let frisian = Category {
        variant: Variant::Frisian,
        speed: None,
    };
    let later = u64::MAX / 4;
    let marked = fixed.rating("bot:fixed", frisian, later).await.unwrap();
    assert_eq!((marked.games, marked.bot), (1, true));
    assert!(
        !fixed
            .rating("player:fixed", frisian, later)
            .await
            .unwrap()
            .bot
    );
}

/// A finished game between players whose ids are as long as Games accepts (140 bytes), with the
/// longest game id, goes through the stream and is rated (it was dead-lettered when ratings took 128).
async fn the_longest_ids_are_rated(b: Backend) {
    let config = test_config();
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let id = |c: char| format!("player:{}", c.to_string().repeat(140 - "player:".len()));
    let (white, black) = (id('w'), id('b'));
    let g = game(&"g".repeat(64), &white, &black, Outcome::WhiteWins, 1_000);
    append_all(&b.live, [event(&g)]).await;
    let (stop, handle) = spawn_consumer(&b, &core, &config, "long");
    wait_applied(&b, &config.consumer_group, 1).await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    let now = draughts_store::now_unix_ms();
    let rating = core.rating(&white, ENGLISH, now).await.unwrap();
    assert_eq!((rating.games, rating.wins), (1, 1), "{rating:?}");
    assert_eq!(core.rating(&black, ENGLISH, now).await.unwrap().games, 1);
    assert_eq!(
        b.live
            .len(draughts_ratings::event::DEAD_LETTER_STREAM)
            .await
            .unwrap_or(0),
        0
    );
}

async fn run_all<F, Fut>(label: &str, mut fresh: F)
where
    F: FnMut(&'static str) -> Fut,
    Fut: Future<Output = Backend>,
{
    let only = std::env::var("RATINGS_CHECK").ok();
    for (name, check) in CHECKS {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        let started = Instant::now();
        let backend = fresh(name).await;
        check(backend.clone()).await;
        backend.db.close().await;
        eprintln!("{label}::{name} ok in {:?}", started.elapsed());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn embedded_memory_and_sqlite() {
    let tmp = tempfile::Builder::new()
        .prefix("draughts-ratings-suite-")
        .tempdir()
        .unwrap();
    let dir_for_checks = tmp.path().to_path_buf();
    run_all("embedded", move |name| {
        let path = dir_for_checks.join(format!("{name}.db"));
        async move {
            Backend {
                live: Arc::new(MemoryStore::new()),
                db: Database::connect(&format!("sqlite://{}?mode=rwc", path.display()))
                    .await
                    .unwrap(),
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_and_postgres() {
    let redis =
        draughts_testkit::RedisServer::start().expect("redis-server (install: redis-server)");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres (install: postgresql)");
    let redis_url = redis.url();
    run_all("redis_postgres", |name| {
        let url = pg.create_database(name).unwrap();
        let redis_url = redis_url.clone();
        async move {
            Backend {
                live: Arc::new(
                    RedisStore::connect(&redis_url, &format!("{name}:"))
                        .await
                        .unwrap(),
                ),
                db: Database::connect(&url).await.unwrap(),
            }
        }
    })
    .await;
}

/// The same checks with the live store on a 3-primary Redis Cluster (`redis+cluster://` URL).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_cluster_and_postgres() {
    let cluster = draughts_testkit::RedisCluster::start()
        .expect("redis cluster (install: redis-server, redis-tools)");
    let pg = draughts_testkit::PostgresServer::start().expect("postgres (install: postgresql)");
    let cluster_url = cluster.url();
    run_all("redis_cluster_postgres", |name| {
        let url = pg.create_database(name).unwrap();
        let cluster_url = cluster_url.clone();
        async move {
            Backend {
                live: draughts_store::open_live_store(&cluster_url, &format!("{name}:"))
                    .await
                    .unwrap(),
                db: Database::connect(&url).await.unwrap(),
            }
        }
    })
    .await;
}

// ------------------------------------------------------------------ helpers

fn test_config() -> RatingsConfig {
    let mut c = RatingsConfig::defaults();
    c.consumer_name = String::new();
    c.batch_size = 64;
    c.block_ms = 50;
    c.claim_idle_ms = 300;
    c.claim_interval_ms = 50;
    c
}

fn side(id: &str) -> Player {
    // Kindless ids ("sp2") as imports and games of before the id checks may hold.
    Player::new(PlayerId::parse_stored(id).unwrap())
}

fn game(id: &str, white: &str, black: &str, outcome: Outcome, at_ms: u64) -> FinishedGame {
    FinishedGame {
        game_id: id.to_owned(),
        variant: Variant::English,
        options: String::new(),
        rated: true,
        white: side(white),
        black: side(black),
        outcome,
        time_control: None,
        finished_at_ms: at_ms,
        traceparent: None,
    }
}

const ENGLISH: Category = Category {
    variant: Variant::English,
    speed: None,
};

/// The stream payload of a game, as the games service writes it (the one contract).
fn event(g: &FinishedGame) -> Bytes {
    // The same side, named as its id (the suite's ids, like "sp2", read as ids of before the checks).
    let player = |s: &Player| Player {
        name: s.id.to_string(),
        ..s.clone()
    };
    Bytes::from(finished::encode(&finished::FinishedV1 {
        game_id: g.game_id.parse().unwrap(),
        variant: g.variant,
        options: g.options.clone(),
        rated: g.rated,
        white: player(&g.white),
        black: player(&g.black),
        outcome: g.outcome,
        reason: finished::EndReason::Resignation,
        result: "1-0".into(),
        time_control: g.time_control,
        plies: 40,
        finished_at_ms: g.finished_at_ms,
        pdn: "[Event \"test\"] 1-0".into(),
        traceparent: None,
    }))
}

/// `n` games among `players` players, deterministic (xorshift), finishing one second apart.
fn random_games(prefix: &str, n: usize, players: usize, seed: u64) -> Vec<FinishedGame> {
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    (0..n)
        .map(|i| {
            let w = (next() % players as u64) as usize;
            let mut b = (next() % players as u64) as usize;
            if b == w {
                b = (b + 1) % players;
            }
            let outcome = match next() % 3 {
                0 => Outcome::WhiteWins,
                1 => Outcome::BlackWins,
                _ => Outcome::Draw,
            };
            game(
                &format!("{prefix}g{i}"),
                &format!("{prefix}p{w}"),
                &format!("{prefix}p{b}"),
                outcome,
                1_700_000_000_000 + i as u64 * 1000,
            )
        })
        .collect()
}

async fn append_all(live: &Arc<dyn LiveStore>, payloads: impl IntoIterator<Item = Bytes>) {
    for payload in payloads {
        live.append(FINISHED_STREAM, payload).await.unwrap();
    }
}

async fn try_count(db: &Database, sql: &'static str) -> Result<i64, sqlx::Error> {
    sqlx::query(sql)
        .fetch_one(db.pool())
        .await?
        .try_get::<i64, _>(0)
}

/// A count; retried twice, because a pooled PostgreSQL connection whose transaction was cancelled
/// mid-query by an aborted consumer task can fail its next statement once (25P02, "current transaction
/// is aborted").
async fn count(db: &Database, sql: &'static str) -> i64 {
    for _ in 0..2 {
        if let Ok(n) = try_count(db, sql).await {
            return n;
        }
    }
    try_count(db, sql).await.unwrap()
}

/// Waits until `expected` games are recorded and nothing is pending in the group.
async fn wait_applied(b: &Backend, group: &str, expected: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // The consumer may not have created its group yet (NotFound: keep waiting). A pooled
        // connection whose transaction was cancelled mid-query by an aborted consumer task can fail
        // its next statement once (PostgreSQL 25P02); the consumer retries such errors, and so does
        // this wait.
        let Ok(recorded) = try_count(&b.db, "SELECT COUNT(*) FROM rating_games").await else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let pending = match b.live.pending_count(FINISHED_STREAM, group).await {
            Ok(n) => n,
            Err(e) if e.code() == draughts_store::ErrorCode::NotFound => u64::MAX,
            Err(e) => panic!("{e}"),
        };
        if recorded == expected && pending == 0 {
            return;
        }
        assert!(
            recorded <= expected,
            "{recorded} games recorded, expected {expected}"
        );
        assert!(
            Instant::now() < deadline,
            "timed out: {recorded} of {expected} recorded, {pending} pending"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Checks that every recorded game was counted exactly once for each rated player (and, one game per
/// period, has one history row per player).
async fn assert_counted_once(db: &Database) {
    assert_counted_once_in(db, true).await;
}

async fn assert_counted_once_in(db: &Database, per_game: bool) {
    // The sides each recorded game rates (both, one under `human-only`, none past the pair limit).
    let rated_sides = count(
        db,
        "SELECT CAST(COALESCE(SUM(rate_white + rate_black), 0) AS BIGINT) FROM rating_games WHERE pending = 0",
    )
    .await;
    let sides = count(
        db,
        "SELECT CAST(COALESCE(SUM(games), 0) AS BIGINT) FROM ratings",
    )
    .await;
    let history = count(db, "SELECT COUNT(*) FROM rating_history").await;
    assert_eq!(
        sides, rated_sides,
        "each game counts once for each rated player"
    );
    if per_game {
        assert_eq!(
            history, rated_sides,
            "one history row per rated player per game"
        );
    }
    let wdl = count(
        db,
        "SELECT CAST(COALESCE(SUM(wins), 0) - COALESCE(SUM(losses), 0) AS BIGINT) FROM ratings",
    )
    .await;
    assert_eq!(wdl, 0, "every win is someone's loss");
}

async fn snapshot(db: &Database) -> BTreeMap<(String, String), (f64, f64, f64, i64)> {
    sqlx::query("SELECT category, player_id, rating, deviation, volatility, games FROM ratings")
        .fetch_all(db.pool())
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                (r.try_get(0).unwrap(), r.try_get(1).unwrap()),
                (
                    r.try_get(2).unwrap(),
                    r.try_get(3).unwrap(),
                    r.try_get(4).unwrap(),
                    r.try_get(5).unwrap(),
                ),
            )
        })
        .collect()
}

fn spawn_consumer(
    b: &Backend,
    core: &RatingsCore,
    config: &RatingsConfig,
    name: &str,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let consumer = Consumer::new(b.live.clone(), core.clone(), config).with_name(name);
    let handle = tokio::spawn(consumer.run(async {
        let _ = rx.await;
    }));
    (tx, handle)
}

// ------------------------------------------------------------------ checks

/// Every game of the stream is rated once, although some entries are delivered twice (the producer
/// archives at least once); applying everything again changes nothing.
async fn stream_games_are_rated_once(b: Backend) {
    let config = test_config();
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let games = random_games("s", 300, 25, 7);
    let mut payloads: Vec<Bytes> = games.iter().map(event).collect();
    // Duplicates: every tenth game is published again later.
    payloads.extend(games.iter().step_by(10).map(event));
    append_all(&b.live, payloads).await;
    let (stop, handle) = spawn_consumer(&b, &core, &config, "c1");
    wait_applied(&b, &config.consumer_group, 300).await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    assert_counted_once(&b.db).await;
    let before = snapshot(&b.db).await;
    assert_eq!(before.len(), 25);

    // Applied again (as a reclaimed batch would be): nothing changes.
    let report = core.apply(&games, Source::Stream, 0).await.unwrap();
    assert_eq!((report.recorded, report.duplicates), (0, 300));
    assert_eq!(snapshot(&b.db).await, before);

    // The ratings read back agree with the rows, and a player's history sums up their changes.
    let view = core
        .rating("sp0", ENGLISH, 1_700_000_400_000)
        .await
        .unwrap();
    let history = core.history("sp0", ENGLISH, 200, "").await.unwrap();
    assert_eq!(history.entries.len() as u32, view.games);
    let change: f64 = history.entries.iter().map(|e| e.rating_change).sum();
    assert!((1500.0 + change - view.glicko.rating).abs() < 1e-6);
    assert_eq!(view.wins + view.draws + view.losses, view.games);
}

/// Reordered and duplicated delivery: one game per period rates a batch in finishing order whatever the
/// arrival order; across batches, each game still counts exactly once.
async fn reordered_delivery(b: Backend) {
    let config = test_config();
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let ordered = random_games("o", 120, 12, 11);
    let mut shuffled = random_games("r", 120, 12, 11);
    // A deterministic shuffle with duplicates mixed in.
    let mut state = 99u64;
    for i in (1..shuffled.len()).rev() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        shuffled.swap(i, (state >> 33) as usize % (i + 1));
    }
    let mut with_duplicates = shuffled.clone();
    with_duplicates.extend(shuffled.iter().take(30).cloned());
    core.apply(&ordered, Source::Stream, 0).await.unwrap();
    let report = core
        .apply(&with_duplicates, Source::Stream, 0)
        .await
        .unwrap();
    assert_eq!((report.recorded, report.duplicates), (120, 30));
    let all = snapshot(&b.db).await;
    for i in 0..12 {
        let o = all[&("english".to_owned(), format!("op{i}"))];
        let r = all[&("english".to_owned(), format!("rp{i}"))];
        assert_eq!(o, r, "player {i}: same games in one batch, same rating");
    }

    // Across batches (the shuffled games delivered in small batches, each entry twice).
    let config2 = test_config();
    let core2 = RatingsCore::new(b.db.clone(), &config2).await.unwrap();
    let mut late = random_games("x", 120, 12, 11);
    late.reverse();
    for chunk in late.chunks(7) {
        core2.apply(chunk, Source::Stream, 0).await.unwrap();
        core2.apply(chunk, Source::Stream, 0).await.unwrap();
    }
    assert_counted_once(&b.db).await;
    let total: i64 = (0..12)
        .map(|i| snapshot_games(&all, &format!("op{i}")))
        .sum();
    assert_eq!(total, 240);
}

fn snapshot_games(all: &BTreeMap<(String, String), (f64, f64, f64, i64)>, player: &str) -> i64 {
    all[&("english".to_owned(), player.to_owned())].3
}

/// A consumer dies holding a batch: once before committing (its entries are pending, nothing written)
/// and once after committing but before acknowledging (pending AND written). Another consumer takes the
/// entries over after the idle time; every game ends up applied exactly once.
async fn consumer_killed_mid_batch_loses_nothing(b: Backend) {
    let config = test_config();
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let group = config.consumer_group.clone();
    b.live.ensure_group(FINISHED_STREAM, &group).await.unwrap();
    let games = random_games("k", 200, 20, 5);
    append_all(&b.live, games.iter().map(event)).await;

    // Dead consumer 1: read 50 entries and died before its transaction committed.
    let died_before = b
        .live
        .read_group(FINISHED_STREAM, &group, "dead-1", 50, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(died_before.len(), 50);
    // Dead consumer 2: read 50, committed them, died before acknowledging.
    let died_after = b
        .live
        .read_group(FINISHED_STREAM, &group, "dead-2", 50, Duration::ZERO)
        .await
        .unwrap();
    let dead = Consumer::new(b.live.clone(), core.clone(), &config).with_name("dead-2");
    let (_ids, report) = dead.process(&died_after).await.unwrap();
    assert_eq!(report.applied.recorded, 50);
    assert_eq!(
        b.live.pending_count(FINISHED_STREAM, &group).await.unwrap(),
        100
    );

    let (stop, handle) = spawn_consumer(&b, &core, &config, "survivor");
    wait_applied(&b, &group, 200).await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    assert_counted_once(&b.db).await;
}

/// A consumer task aborted (not stopped) at several moments while it works, then replaced: nothing is
/// lost or counted twice.
async fn consumer_aborted_at_random_moments(b: Backend) {
    let mut config = test_config();
    config.batch_size = 7;
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let games = random_games("a", 400, 30, 3);
    append_all(&b.live, games.iter().map(event)).await;
    for (round, after_ms) in [5u64, 17, 29, 43].into_iter().enumerate() {
        let (_stop, handle) = spawn_consumer(&b, &core, &config, &format!("victim-{round}"));
        tokio::time::sleep(Duration::from_millis(after_ms)).await;
        handle.abort();
        let _ = handle.await;
    }
    let (stop, handle) = spawn_consumer(&b, &core, &config, "last");
    wait_applied(&b, &config.consumer_group, 400).await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    assert_counted_once(&b.db).await;
}

/// Keyset paging: while other players' ratings change between page reads, the pages never repeat or
/// skip a player whose rating did not change, and entries come strictly in (rating desc, id asc) order.
async fn leaderboard_paging_under_concurrent_updates(b: Backend) {
    let mut config = test_config();
    // One game makes a player established, so that every player is on the leaderboard.
    config.provisional_deviation = 340.0;
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let players = 90;
    let mut setup = Vec::new();
    for i in 0..players {
        let opponent = (i + 1) % players;
        let outcome = if i % 3 == 0 {
            Outcome::Draw
        } else {
            Outcome::WhiteWins
        };
        setup.push(game(
            &format!("setup{i}"),
            &format!("l{i:03}"),
            &format!("l{opponent:03}"),
            outcome,
            1_000 + i as u64,
        ));
    }
    core.apply(&setup, Source::Import, 0).await.unwrap();
    let now = 2_000;
    let movers: HashSet<String> = (0..players)
        .filter(|i| i % 9 == 4)
        .map(|i| format!("l{i:03}"))
        .collect();
    let stable: HashSet<String> = (0..players)
        .map(|i| format!("l{i:03}"))
        .filter(|p| !movers.contains(p))
        .collect();

    // A writer changes the movers' ratings (games among themselves) until told to stop; after each
    // page, the reader waits for at least one more batch of updates, so every page boundary sees changes.
    let writer_core = core.clone();
    let movers_list: Vec<String> = movers.iter().cloned().collect();
    let rounds = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (writer_rounds, writer_stop) = (rounds.clone(), stop.clone());
    let writer = tokio::spawn(async move {
        let mut round = 0u64;
        while !writer_stop.load(std::sync::atomic::Ordering::SeqCst) {
            let mut batch = Vec::new();
            for (j, w) in movers_list.iter().enumerate() {
                let l = &movers_list[(j + 1 + round as usize) % movers_list.len()];
                if w != l {
                    batch.push(game(
                        &format!("move{round}-{j}"),
                        w,
                        l,
                        Outcome::WhiteWins,
                        1_500,
                    ));
                }
            }
            writer_core.apply(&batch, Source::Import, 0).await.unwrap();
            round += 1;
            writer_rounds.store(round, std::sync::atomic::Ordering::SeqCst);
            tokio::task::yield_now().await;
        }
    });
    let wait_for_writes = || async {
        let seen_rounds = rounds.load(std::sync::atomic::Ordering::SeqCst);
        while rounds.load(std::sync::atomic::Ordering::SeqCst) <= seen_rounds {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    };

    let mut seen: Vec<(f64, String, u64)> = Vec::new();
    let mut token = String::new();
    let mut pages = 0;
    loop {
        wait_for_writes().await;
        let page = core
            .leaderboard(ENGLISH, false, 7, &token, now)
            .await
            .unwrap();
        pages += 1;
        for (rank, view) in &page.entries {
            seen.push((view.glicko.rating, view.player_id.clone(), *rank));
            assert!(!view.provisional);
        }
        match page.next_page_token {
            Some(next) => token = next,
            None => break,
        }
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    writer.await.unwrap();
    assert!(pages >= 10, "{pages} pages");
    for pair in seen.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        assert!(
            a.0 > b.0 || (a.0 == b.0 && a.1 < b.1),
            "entries out of order: {a:?} then {b:?}"
        );
    }
    let mut occurrences: HashMap<&str, usize> = HashMap::new();
    for (_, player, _) in &seen {
        *occurrences.entry(player).or_default() += 1;
    }
    for player in &stable {
        assert_eq!(
            occurrences.get(player.as_str()),
            Some(&1),
            "{player} must appear exactly once"
        );
    }
    // Without concurrent writes, ranks are 1..n in order.
    let mut token = String::new();
    let mut rank = 0;
    loop {
        let page = core
            .leaderboard(ENGLISH, false, 11, &token, now)
            .await
            .unwrap();
        for (r, _) in &page.entries {
            rank += 1;
            assert_eq!(*r, rank);
        }
        match page.next_page_token {
            Some(next) => token = next,
            None => break,
        }
    }
    assert_eq!(rank, players as u64);
    // A token is bound to its leaderboard.
    let first = core.leaderboard(ENGLISH, false, 5, "", now).await.unwrap();
    let international = Category {
        variant: Variant::International,
        speed: None,
    };
    let err = core
        .leaderboard(
            international,
            false,
            5,
            first.next_page_token.as_deref().unwrap(),
            now,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("another leaderboard"), "{err}");
    assert!(
        core.leaderboard(ENGLISH, false, 5, "zz", now)
            .await
            .is_err()
    );
    assert!(
        core.leaderboard(ENGLISH, false, 500, "", now)
            .await
            .is_err()
    );
}

/// Casual games, computer games, guests, house rules and aborted games as the configuration says.
async fn policies(b: Backend) {
    let at = 1_000;
    let mut casual = game("casual", "pa", "pb", Outcome::WhiteWins, at);
    casual.rated = false;
    let mut vs_computer = game("computer", "pc", "ai:5", Outcome::WhiteWins, at);
    vs_computer.black.computer = true;
    let mut guest = game("guest", "guest:1", "pd", Outcome::Draw, at);
    guest.white.guest = true;
    let mut house = game("house", "pe", "pf", Outcome::Draw, at);
    house.options = "no-mandatory-capture".into();
    let aborted = game("aborted", "pg", "ph", Outcome::Aborted, at);
    let itself = game("itself", "pi", "pi", Outcome::Draw, at);
    let all = vec![casual, vs_computer, guest, house, aborted, itself];

    // Defaults: casual, computer, guest and house-rule games skipped (guests are not rated: anyone can
    // make guests to farm a rating with).
    let defaults = RatingsCore::new(b.db.clone(), &test_config())
        .await
        .unwrap();
    let report = defaults.apply(&all, Source::Stream, 0).await.unwrap();
    assert_eq!((report.recorded, report.skipped), (0, 6));
    assert_eq!(
        defaults.rating("guest:1", ENGLISH, at).await.unwrap().games,
        0
    );

    // Everything rated; the computer human-only.
    let mut config = test_config();
    config.casual_games = Policy::Rate;
    config.house_rule_games = Policy::Rate;
    config.guest_games = Policy::Skip;
    config.computer_games = ComputerPolicy::HumanOnly;
    let permissive = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let report = permissive.apply(&all, Source::Stream, 0).await.unwrap();
    // casual, computer, house newly recorded; guest, aborted, itself skipped.
    assert_eq!(
        (report.recorded, report.duplicates, report.skipped),
        (3, 0, 3)
    );
    assert_eq!(permissive.rating("pa", ENGLISH, at).await.unwrap().games, 1);
    let human = permissive.rating("pc", ENGLISH, at).await.unwrap();
    assert_eq!((human.games, human.wins), (1, 1));
    let computer = permissive.rating("ai:5", ENGLISH, at).await.unwrap();
    assert_eq!(computer.games, 0, "human-only leaves the computer as it is");
    assert_eq!(permissive.rating("pe", ENGLISH, at).await.unwrap().games, 1);

    // Both computer sides rated.
    config.computer_games = ComputerPolicy::Rate;
    let both = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let mut g = game("computer2", "pj", "ai:6", Outcome::BlackWins, at);
    g.black.computer = true;
    both.apply(&[g], Source::Stream, 0).await.unwrap();
    assert_eq!(both.rating("ai:6", ENGLISH, at).await.unwrap().wins, 1);

    // Speed classes: international per speed class when the time control is known.
    let mut blitz = game("blitz", "pk", "pl", Outcome::WhiteWins, at);
    blitz.variant = Variant::International;
    blitz.time_control = Some(TimeControl::Fischer {
        base_ms: 300_000,
        increment_ms: 3_000,
    });
    both.apply(&[blitz], Source::Stream, 0).await.unwrap();
    let ratings = both.ratings("pk", at).await.unwrap();
    assert_eq!(ratings.len(), 1);
    assert_eq!(
        ratings[0].category,
        Category {
            variant: Variant::International,
            speed: Some(Speed::Blitz)
        }
    );
    assert!(
        both.check_category(Category {
            variant: Variant::English,
            speed: Some(Speed::Blitz)
        })
        .is_err()
    );
}

/// The pair limit (`--pair-games-per-day`): the games of two players in one category that finished
/// within 24 hours of each other change ratings up to the limit; later ones are recorded and change
/// nothing; the window slides; other pairs and other categories count apart; one batch or one game a
/// call gives the same ratings; an import says why it changed nothing.
async fn a_pair_s_games_are_rated_up_to_the_daily_limit(b: Backend) {
    let mut config = test_config();
    config.pair_games_per_day = 3;
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let hour = 3_600_000;
    let t0 = 1_700_000_000_000;
    // Five games of pa and pb within two hours (colours alternating), one of pa and pc.
    let mut batch: Vec<FinishedGame> = (0..5)
        .map(|i| {
            let (w, bl) = if i % 2 == 0 {
                ("pa", "pb")
            } else {
                ("pb", "pa")
            };
            game(
                &format!("ab{i}"),
                w,
                bl,
                Outcome::WhiteWins,
                t0 + i * hour / 4,
            )
        })
        .collect();
    batch.push(game("ac0", "pa", "pc", Outcome::Draw, t0 + hour));
    let report = core.apply(&batch, Source::Stream, t0).await.unwrap();
    assert_eq!((report.recorded, report.pair_limited), (6, 2));
    let now = t0 + 2 * hour;
    assert_eq!(core.rating("pa", ENGLISH, now).await.unwrap().games, 4);
    assert_eq!(core.rating("pb", ENGLISH, now).await.unwrap().games, 3);
    assert_eq!(core.rating("pc", ENGLISH, now).await.unwrap().games, 1);
    // Delivered again: nothing changes, and a limited game stays unrated.
    let again = core.apply(&batch, Source::Stream, now).await.unwrap();
    assert_eq!((again.recorded, again.duplicates), (0, 6));
    assert_eq!(core.rating("pa", ENGLISH, now).await.unwrap().games, 4);
    // Another category is another count.
    let mut intl = game("ab-intl", "pa", "pb", Outcome::Draw, t0 + hour);
    intl.variant = Variant::International;
    let r = core.apply(&[intl], Source::Stream, now).await.unwrap();
    assert_eq!(r.pair_limited, 0);
    // An import past the limit is recorded, says why, and changes nothing.
    let imported = core
        .record(
            &game("ab-import", "pa", "pb", Outcome::BlackWins, t0 + 2 * hour),
            now,
        )
        .await
        .unwrap();
    assert!(imported.recorded);
    assert_eq!(
        imported.skipped_reason,
        Some(draughts_ratings::domain::PAIR_LIMITED)
    );
    assert_eq!(imported.white.games, 4);
    // A day after the first games, the window has moved on: rated again.
    let later = game(
        "ab-later",
        "pb",
        "pa",
        Outcome::Draw,
        t0 + 24 * hour + hour / 2,
    );
    let r = core.apply(&[later], Source::Stream, now).await.unwrap();
    assert_eq!(r.pair_limited, 0);
    assert_eq!(
        core.rating("pa", ENGLISH, t0 + 25 * hour)
            .await
            .unwrap()
            .games,
        5
    );
    assert_counted_once(&b.db).await;

    // The same games one a call, on fresh players: the same ratings as in one batch.
    let rename = |g: &FinishedGame| {
        let mut g = g.clone();
        g.game_id = format!("one-{}", g.game_id);
        for s in [&mut g.white, &mut g.black] {
            s.id = PlayerId::parse_stored(&format!("one-{}", s.id)).unwrap();
        }
        g
    };
    batch.sort_by_key(|g| g.finished_at_ms);
    for g in &batch {
        core.apply(&[rename(g)], Source::Stream, t0).await.unwrap();
    }
    // (pa and pb have later games too: their counts, and pc's rating, tell.)
    assert_eq!(core.rating("one-pa", ENGLISH, now).await.unwrap().games, 4);
    assert_eq!(core.rating("one-pb", ENGLISH, now).await.unwrap().games, 3);
    let together = core.rating("pc", ENGLISH, now).await.unwrap();
    let one_by_one = core.rating("one-pc", ENGLISH, now).await.unwrap();
    assert_eq!(together.games, one_by_one.games);
    assert!((together.glicko.rating - one_by_one.glicko.rating).abs() < 1e-9);

    // 0: no limit.
    config.pair_games_per_day = 0;
    let unlimited = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let many: Vec<FinishedGame> = (0..6)
        .map(|i| game(&format!("zz{i}"), "pz", "py", Outcome::Draw, t0 + i))
        .collect();
    let r = unlimited.apply(&many, Source::Stream, t0).await.unwrap();
    assert_eq!((r.recorded, r.pair_limited), (6, 0));
    assert_eq!(unlimited.rating("pz", ENGLISH, now).await.unwrap().games, 6);
}

/// Fixed periods: games wait for the end of their period, then every player's games of the period are
/// rated together against the opponents' ratings at the start of the period (as Glickman computes);
/// the order of arrival does not matter; a game arriving after its period was rated joins the next.
async fn fixed_periods_rate_games_together(b: Backend) {
    let mut config = test_config();
    config.periods = PeriodMode::Fixed;
    config.period_secs = 1000;
    config.period_grace_secs = 10;
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let period_ms = 1_000_000u64;
    // Period 5: Glickman's example (the player beats a, loses to b and c), then more games in period 6.
    let start = 5 * period_ms;
    let mut games = vec![
        game("f1", "me", "a", Outcome::WhiteWins, start + 10),
        game("f2", "b", "me", Outcome::WhiteWins, start + 20),
        game("f3", "me", "c", Outcome::BlackWins, start + 30),
    ];
    games.reverse();
    let report = core.apply(&games, Source::Stream, 0).await.unwrap();
    assert_eq!((report.recorded, report.pending), (3, 3));
    assert_eq!(core.rating("me", ENGLISH, start).await.unwrap().games, 0);
    // Not rated before the period ends plus the grace time.
    assert_eq!(
        core.close_due_periods(6 * period_ms + 5_000).await.unwrap(),
        0
    );
    assert_eq!(
        core.close_due_periods(6 * period_ms + 10_000)
            .await
            .unwrap(),
        1
    );
    let me = core
        .rating("me", ENGLISH, 6 * period_ms + 10_000)
        .await
        .unwrap();
    let params = config.params();
    let new = params.initial();
    let expected = glicko::rate(
        new,
        &[
            Game {
                opponent: new,
                score: 1.0,
            },
            Game {
                opponent: new,
                score: 0.0,
            },
            Game {
                opponent: new,
                score: 0.0,
            },
        ],
        1.0,
        &params,
    );
    assert_eq!(me.games, 3);
    assert!((me.glicko.rating - expected.rating).abs() < 1e-9);
    assert!((me.glicko.deviation - expected.deviation).abs() < 1e-9);
    let history = core.history("me", ENGLISH, 10, "").await.unwrap();
    assert_eq!(history.entries.len(), 1);
    assert_eq!(
        (history.entries[0].games, history.entries[0].games_total),
        (3, 3)
    );
    assert_eq!(history.entries[0].at_ms, 6 * period_ms);

    // A late game of period 5 goes into period 6; closing twice rates once.
    let late = game("f4", "me", "a", Outcome::Draw, start + 40);
    assert_eq!(
        core.apply(&[late], Source::Stream, 0)
            .await
            .unwrap()
            .pending,
        1
    );
    assert_eq!(
        core.close_due_periods(7 * period_ms + 9_000).await.unwrap(),
        0
    );
    assert_eq!(
        core.close_due_periods(7 * period_ms + 10_000)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        core.close_due_periods(7 * period_ms + 10_000)
            .await
            .unwrap(),
        0
    );
    assert_eq!(
        core.rating("me", ENGLISH, 7 * period_ms + 10_000)
            .await
            .unwrap()
            .games,
        4
    );
    assert_counted_once_in(&b.db, false).await;
    // One history row per player per period: me, a, b, c in period 5; me and a in period 6.
    assert_eq!(count(&b.db, "SELECT COUNT(*) FROM rating_history").await, 6);
}

/// One game per period: the deviation grows with the time since the last game, a player drops off the
/// leaderboard when it passes the provisional threshold, and comes back after playing.
async fn inactivity_grows_deviation(b: Backend) {
    let mut config = test_config();
    // 30 games of one pair at once: all to be rated here.
    config.pair_games_per_day = 0;
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let period_ms = config.period_secs * 1000;
    // 30 games between two players: both well established.
    let games: Vec<FinishedGame> = (0..30)
        .map(|i| {
            let outcome = if i % 2 == 0 {
                Outcome::WhiteWins
            } else {
                Outcome::Draw
            };
            game(&format!("i{i}"), "ann", "bob", outcome, 1_000 + i)
        })
        .collect();
    core.apply(&games, Source::Stream, 0).await.unwrap();
    let fresh = core.rating("ann", ENGLISH, 1_030).await.unwrap();
    assert!(!fresh.provisional, "{fresh:?}");
    assert!(fresh.glicko.deviation < 110.0);
    let board = core
        .leaderboard(ENGLISH, false, 10, "", 1_030)
        .await
        .unwrap();
    assert_eq!(board.entries.len(), 2);
    assert_eq!(board.entries[0].1.player_id, "ann");

    let later = core
        .rating("ann", ENGLISH, 1_030 + 50 * period_ms)
        .await
        .unwrap();
    assert!(later.glicko.deviation > fresh.glicko.deviation);
    assert_eq!(later.glicko.rating, fresh.glicko.rating);
    let much_later = core
        .rating("ann", ENGLISH, 1_030 + 100_000 * period_ms)
        .await
        .unwrap();
    assert_eq!(much_later.glicko.deviation, config.max_deviation);
    assert!(much_later.provisional);
    let empty = core
        .leaderboard(ENGLISH, false, 10, "", 1_030 + 100_000 * period_ms)
        .await
        .unwrap();
    assert!(
        empty.entries.is_empty(),
        "inactive players leave the leaderboard"
    );

    // The prediction favours the stronger player and is symmetric.
    let p = core.predict("ann", "bob", ENGLISH, 1_030).await.unwrap();
    assert!(p.expected_a > 0.5 && p.expected_a < 1.0);
    let q = core.predict("bob", "ann", ENGLISH, 1_030).await.unwrap();
    assert!((p.expected_a + q.expected_a - 1.0).abs() < 1e-12);
}

/// Entries that can never be applied are copied to the dead-letter stream and acknowledged; the good
/// entries around them are applied.
async fn malformed_entries_are_dead_lettered(b: Backend) {
    let config = test_config();
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let good = random_games("m", 3, 3, 1);
    let mut payloads: Vec<Bytes> = vec![Bytes::from_static(b"not json")];
    payloads.extend(good.iter().map(event));
    payloads.push(Bytes::from_static(br#"{"v":2,"game_id":"future"}"#));
    append_all(&b.live, payloads).await;
    let (stop, handle) = spawn_consumer(&b, &core, &config, "c");
    wait_applied(&b, &config.consumer_group, 3).await;
    stop.send(()).unwrap();
    handle.await.unwrap();
    let dead = b
        .live
        .range(draughts_ratings::event::DEAD_LETTER_STREAM, None, 10)
        .await
        .unwrap();
    assert_eq!(dead.len(), 2);
    assert_eq!(dead[0].payload, Bytes::from_static(b"not json"));
}

/// History pages are newest first, continue without overlap, and tokens are bound to their history.
async fn history_pages(b: Backend) {
    let mut config = test_config();
    // 23 games of one pair at once: all to be rated here.
    config.pair_games_per_day = 0;
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let games: Vec<FinishedGame> = (0..23)
        .map(|i| {
            game(
                &format!("h{i}"),
                "hist",
                "other",
                Outcome::WhiteWins,
                1_000 + i,
            )
        })
        .collect();
    core.apply(&games, Source::Stream, 0).await.unwrap();
    let mut token = String::new();
    let mut totals = Vec::new();
    loop {
        let page = core.history("hist", ENGLISH, 5, &token).await.unwrap();
        totals.extend(page.entries.iter().map(|e| e.games_total));
        match page.next_page_token {
            Some(next) => token = next,
            None => break,
        }
    }
    assert_eq!(totals, (1..=23).rev().collect::<Vec<u32>>());
    let page = core.history("hist", ENGLISH, 5, "").await.unwrap();
    let token = page.next_page_token.unwrap();
    assert!(core.history("other", ENGLISH, 5, &token).await.is_err());
    assert_eq!(page.entries[0].game_id, "h22");
    assert!(page.entries.iter().all(|e| e.rating_change > 0.0));
}

/// The games service as the reconciler sees it: the finished games it lists
/// (`Games.ListFinishedGames`), kept in memory; the real one is checked end to end in
/// `services/draughtsd/tests/reconcile.rs`.
#[derive(Debug, Default)]
struct ArchivedGames {
    games: std::sync::Mutex<Vec<FeedEntry>>,
    /// Whether each game was created rated (the feed's `rated_only`).
    rated: std::sync::Mutex<HashMap<String, bool>>,
}

impl ArchivedGames {
    fn archive(&self, g: &FinishedGame) {
        let mut games = self.games.lock().unwrap();
        games.push(FeedEntry {
            game_id: g.game_id.clone(),
            finished_at_ms: g.finished_at_ms,
            event: event(g).to_vec(),
        });
        games.sort_by(|a, b| (a.finished_at_ms, &a.game_id).cmp(&(b.finished_at_ms, &b.game_id)));
        self.rated
            .lock()
            .unwrap()
            .insert(g.game_id.clone(), g.rated);
    }
}

#[tonic::async_trait]
impl FinishedFeed for ArchivedGames {
    async fn page(&self, q: &FeedQuery) -> draughts_ratings::error::RatingsResult<Vec<FeedEntry>> {
        let rated = self.rated.lock().unwrap().clone();
        Ok(self
            .games
            .lock()
            .unwrap()
            .iter()
            .filter(|e| {
                (e.finished_at_ms, e.game_id.as_str()) > (q.after_ms, q.after_game_id.as_str())
            })
            .filter(|e| e.finished_at_ms < q.before_ms)
            .filter(|e| !q.rated_only || rated[&e.game_id])
            .take(q.limit)
            .cloned()
            .collect())
    }
}

/// Games archived while their stream entries were lost (trimmed off the stream before any consumer
/// read them, as a Redis restart without its append-only file loses them) are found in what the games
/// service lists and rated exactly once, with the entries that did survive rated once too; a game
/// archived late (finished before the watermark, within the margin) is found by the next sweep; an
/// entry that does not decode is skipped; without a feed the reconciler is off.
async fn games_lost_from_the_stream_are_reconciled(b: Backend) {
    let mut config = test_config();
    config.reconcile_interval_ms = 50;
    config.reconcile_delay_ms = 0;
    let core = RatingsCore::new(b.db.clone(), &config).await.unwrap();
    let archived = Arc::new(ArchivedGames::default());
    let games = random_games("r", 40, 8, 11);
    for g in &games {
        archived.archive(g);
    }
    append_all(&b.live, games.iter().map(event)).await;
    // The first 30 entries are lost; the last 10 survive.
    b.live.trim(FINISHED_STREAM, 10).await.unwrap();
    assert_eq!(b.live.len(FINISHED_STREAM).await.unwrap(), 10);

    // Without a feed the reconciler is off.
    let off = Reconciler::new(core.clone(), &config);
    assert_eq!(off.interval(), Duration::ZERO);
    let report = off.page(draughts_store::now_unix_ms()).await.unwrap();
    assert_eq!((report.scanned, report.sweep_done), (0, true));

    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let consumer = Consumer::new(b.live.clone(), core.clone(), &config)
        .with_name("c1")
        .with_feed(archived.clone());
    let handle = tokio::spawn(consumer.run(async {
        let _ = rx.await;
    }));
    wait_applied(&b, &config.consumer_group, 40).await;
    let reconciler = Reconciler::new(core.clone(), &config)
        .with_feed(archived.clone())
        .with_page_rows(7);
    // The consumer's sweeps are done once the watermark has passed the games.
    let deadline = Instant::now() + Duration::from_secs(30);
    while reconciler.watermark().await.unwrap() <= games.last().unwrap().finished_at_ms {
        assert!(Instant::now() < deadline, "the watermark never moved");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tx.send(()).unwrap();
    handle.await.unwrap();
    assert_counted_once(&b.db).await;
    let reconciled = count(
        &b.db,
        "SELECT COUNT(*) FROM rating_games WHERE source = 'reconcile'",
    )
    .await;
    assert!(
        (30..=40).contains(&reconciled),
        "{reconciled} games reconciled"
    );
    let before = snapshot(&b.db).await;

    // Another sweep (small pages) finds nothing new and changes nothing.
    let now = draughts_store::now_unix_ms();
    let again = reconciler.sweep(now).await.unwrap();
    assert_eq!((again.scanned, again.applied.recorded), (0, 0));
    assert_eq!(snapshot(&b.db).await, before);

    // Archived late: finished 10 minutes before the watermark (inside the margin), no stream entry.
    let watermark = reconciler.watermark().await.unwrap();
    let late = game("late1", "rp0", "rp1", Outcome::Draw, watermark - 600_000);
    archived.archive(&late);
    let report = reconciler.sweep(now + 1000).await.unwrap();
    assert_eq!((report.scanned, report.applied.recorded), (1, 1));
    // A casual game is not even asked for while casual games are not rated; it is when they are.
    let casual = FinishedGame {
        rated: false,
        ..game("casual1", "rp2", "rp3", Outcome::Draw, watermark - 500_000)
    };
    archived.archive(&casual);
    let report = reconciler.sweep(now + 1500).await.unwrap();
    assert_eq!((report.scanned, report.applied.recorded), (0, 0));
    let mut rating_casual = config.clone();
    rating_casual.casual_games = draughts_ratings::Policy::Rate;
    let casual_reconciler = Reconciler::new(
        RatingsCore::new(b.db.clone(), &rating_casual)
            .await
            .unwrap(),
        &rating_casual,
    )
    .with_feed(archived.clone());
    let report = casual_reconciler.sweep(now + 1600).await.unwrap();
    assert_eq!(report.scanned, 1, "read when casual games are rated");
    // An entry that does not decode is counted and skipped.
    archived.games.lock().unwrap().push(FeedEntry {
        game_id: "broken1".into(),
        finished_at_ms: watermark - 400_000,
        event: br#"{"v":99}"#.to_vec(),
    });
    archived
        .rated
        .lock()
        .unwrap()
        .insert("broken1".into(), true);
    let report = reconciler.sweep(now + 1700).await.unwrap();
    assert_eq!((report.scanned, report.undecodable), (1, 1));
    // Outside the margin: not looked at again (the watermark is the promise).
    let ancient = game(
        "ancient1",
        "rp0",
        "rp1",
        Outcome::Draw,
        watermark - 7_200_000,
    );
    archived.archive(&ancient);
    let report = reconciler.sweep(now + 2000).await.unwrap();
    assert_eq!(report.applied.recorded, 0);
    assert_eq!(count(&b.db, "SELECT COUNT(*) FROM rating_games").await, 42);
    assert_counted_once(&b.db).await;
}
