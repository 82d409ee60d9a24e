//! The live-store checks and their runs on each backend.

use std::sync::Arc;
use std::time::Duration;

use draughts_store::{LiveStore, MemoryStore, RedisStore};
use draughts_testkit::{RedisCluster, RedisServer};

pub type Store = Arc<dyn LiveStore>;

/// A store and whatever must live as long as it (the Redis server).
pub struct Opened {
    pub store: Store,
    _server: Option<RedisServer>,
}

pub async fn open_memory() -> Opened {
    Opened {
        store: Arc::new(MemoryStore::new()),
        _server: None,
    }
}

pub async fn open_redis() -> Opened {
    let server = RedisServer::start().expect("start redis-server");
    let store = RedisStore::connect(&server.url(), "suite:")
        .await
        .expect("connect to the test redis-server");
    Opened {
        store: Arc::new(store),
        _server: Some(server),
    }
}

/// A store on the test binary's shared 3-primary Redis Cluster, under a prefix of its own.
pub async fn open_cluster() -> Opened {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let cluster = RedisCluster::shared().expect("start a redis cluster");
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let store = RedisStore::connect_cluster(&cluster.node_urls(), &format!("suite-{n}:"))
        .await
        .expect("connect to the test redis cluster");
    Opened {
        store: Arc::new(store),
        _server: None,
    }
}

/// One `#[tokio::test]` per check and backend, named `<backend>::<check>`.
macro_rules! live_store_suite {
    ($($backend:ident => $open:path),* $(,)?) => {$(
        mod $backend {
            live_store_suite!(@checks $open;
                kv_versions_and_delete,
                cas_race_has_one_winner,
                kv_ttl_expires,
                lease_is_exclusive_and_expires,
                group_delivers_each_entry_once_and_acks,
                crashed_consumer_entries_are_claimed,
                backlog_counts_what_the_group_was_not_handed,
                append_bounded_stops_at_the_waiting_bound,
                blocking_read_is_woken_by_append,
                read_groups_waits_on_several_streams_at_once,
                blocking_read_times_out_empty,
                tail_follows_new_entries,
                range_pages_through_history,
                trim_keeps_the_newest,
                pubsub_reaches_two_subscribers,
                pubsub_fans_out_to_many_subscribers_and_channels,
                lagging_subscriber_gets_a_gap,
                trim_consumed_keeps_what_a_group_needs,
                groups_report_pending_and_lag,
                schedule_len_counts_members,
                scheduled_lists_members_in_time_order,
                take_due_is_exactly_once_under_concurrency,
                schedule_cancel_and_next_due,
                put_with_applies_effects_only_when_it_wins,
                put_with_refuses_effects_outside_the_key_group,
                claimed_due_members_come_back_unless_dealt_with,
                rate_counter_resets_after_window,
                errors_have_codes,
            );
        }
    )*};
    (@checks $open:path; $($check:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $check() {
            let opened = $open().await;
            super::checks::$check(opened.store.clone()).await;
        }
    )*};
}

live_store_suite! {
    memory => super::open_memory,
    redis => super::open_redis,
    cluster => super::open_cluster,
}

/// Redis only: two prefixes on one server do not see each other.
#[tokio::test]
async fn redis_prefixes_isolate_deployments() {
    use draughts_store::Bytes;
    let server = RedisServer::start().expect("start redis-server");
    let first = RedisStore::connect(&server.url(), "one:").await.unwrap();
    let second = RedisStore::connect(&server.url(), "two:").await.unwrap();
    first
        .put("k", Bytes::from_static(b"1"), None, None)
        .await
        .unwrap();
    first.append("s", Bytes::from_static(b"x")).await.unwrap();
    assert_eq!(second.get("k").await.unwrap(), None);
    assert_eq!(second.len("s").await.unwrap(), 0);
    assert_eq!(first.keys().stream("s"), "one:stream:s");
}

/// `open_live_store` picks the backend from the URL.
#[tokio::test]
async fn open_live_store_by_url() {
    use draughts_store::{ErrorCode, open_live_store};
    let server = RedisServer::start().expect("start redis-server");
    let redis = open_live_store(&server.url(), "url:").await.unwrap();
    assert!(format!("{redis:?}").contains("RedisStore"));
    let memory = open_live_store("memory://", "").await.unwrap();
    assert!(format!("{memory:?}").contains("MemoryStore"));
    let bad = open_live_store("mongodb://x", "").await.unwrap_err();
    assert_eq!(bad.code(), ErrorCode::InvalidArgument);
}

/// Cluster only: the names of one group (a game's record, its stream, its deadline) are on one
/// primary, the groups are spread over all three, and the URL of the services reaches the cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_keeps_each_group_on_one_primary_and_spreads_the_groups() {
    use draughts_store::{Bytes, Effect, open_live_store};
    const N_GAMES: usize = 48;
    let cluster = RedisCluster::shared().expect("start a redis cluster");
    let store = open_live_store(&cluster.url(), "spread:").await.unwrap();
    assert!(format!("{store:?}").contains("RedisStore"));
    for n in 0..N_GAMES {
        let id = format!("g{n}");
        store
            .put_with(
                &format!("game:{{{id}}}"),
                Bytes::from_static(b"state"),
                None,
                None,
                &[Effect::Schedule {
                    set: "deadlines".into(),
                    member: id.clone(),
                    at_unix_ms: 1_000 + n as u64,
                }],
            )
            .await
            .unwrap();
        store
            .append(&format!("moves:{{{id}}}"), Bytes::from_static(b"m"))
            .await
            .unwrap();
    }
    // Where each key is, asked of each node directly.
    let mut holder = std::collections::HashMap::new();
    let mut nodes_used = 0;
    for url in cluster.node_urls() {
        let client = ::redis::Client::open(url.as_str()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let keys: Vec<String> = ::redis::cmd("KEYS")
            .arg("spread:*")
            .query_async(&mut conn)
            .await
            .unwrap();
        nodes_used += usize::from(!keys.is_empty());
        for n in 0..N_GAMES {
            let member = format!("g{n}");
            for key in &keys {
                let kind = if key.ends_with(&format!("kv:game:{{{member}}}")) {
                    "kv"
                } else if key.ends_with(&format!("stream:moves:{{{member}}}")) {
                    "stream"
                } else if key.ends_with("due:deadlines") {
                    let score: Option<f64> = ::redis::cmd("ZSCORE")
                        .arg(key)
                        .arg(&member)
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                    if score.is_none() {
                        continue;
                    }
                    "deadline"
                } else {
                    continue;
                };
                holder.insert((member.clone(), kind), url.clone());
            }
        }
    }
    assert_eq!(
        nodes_used,
        RedisCluster::MASTERS,
        "groups spread over every primary"
    );
    for n in 0..N_GAMES {
        let member = format!("g{n}");
        let at = |kind: &'static str| holder.get(&(member.clone(), kind)).cloned();
        assert!(at("kv").is_some(), "{member} stored");
        assert_eq!(
            at("kv"),
            at("stream"),
            "{member}: record and stream together"
        );
        assert_eq!(
            at("kv"),
            at("deadline"),
            "{member}: record and deadline together"
        );
    }
    // The spread schedule reads as one.
    assert_eq!(
        store.schedule_len("deadlines").await.unwrap(),
        N_GAMES as u64
    );
    assert_eq!(
        store.next_due("deadlines").await.unwrap(),
        Some(("g0".to_owned(), 1_000))
    );
    let due = store.take_due("deadlines", 1_009, 100).await.unwrap();
    let expected: Vec<String> = (0..10).map(|n| format!("g{n}")).collect();
    assert_eq!(due, expected, "earliest first across the shards");
    let claimed = store
        .claim_due("deadlines", 10_000, 5, Duration::from_secs(60))
        .await
        .unwrap();
    let expected: Vec<String> = (10..15).map(|n| format!("g{n}")).collect();
    assert_eq!(claimed, expected);
    assert_eq!(
        store.schedule_len("deadlines").await.unwrap(),
        N_GAMES as u64 - 10
    );
}

/// Cluster only: a primary restarted (SIGTERM, then started again with its append-only file) loses
/// nothing: every game and deadline is readable again, the pub/sub connection (on the restarted
/// node) comes back with a `Gap`, and publications flow again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_survives_a_primary_restart() {
    use draughts_store::{Bytes, Effect, Notice, open_live_store};
    use futures_util::StreamExt;
    use std::time::Instant;
    const N_GAMES: usize = 32;
    let mut cluster = RedisCluster::start().expect("start a redis cluster");
    let store = open_live_store(&cluster.url(), "restart:").await.unwrap();
    let mut watch = store.subscribe("events").await.unwrap();
    for n in 0..N_GAMES {
        store
            .put_with(
                &format!("game:{{g{n}}}"),
                Bytes::from(format!("state {n}")),
                None,
                None,
                &[Effect::Schedule {
                    set: "deadlines".into(),
                    member: format!("g{n}"),
                    at_unix_ms: 1_000 + n as u64,
                }],
            )
            .await
            .unwrap();
    }
    // The first node: where the store's pub/sub connection and its publications are.
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.restart_node(0).expect("restart a primary");
        cluster
    })
    .await
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    for n in 0..N_GAMES {
        let key = format!("game:{{g{n}}}");
        loop {
            match store.get(&key).await {
                Ok(Some((value, 1))) => {
                    assert_eq!(value, Bytes::from(format!("state {n}")));
                    break;
                }
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => panic!("{key} after the restart: {other:?}"),
            }
        }
    }
    assert_eq!(
        store.schedule_len("deadlines").await.unwrap(),
        N_GAMES as u64
    );
    let mut gap = false;
    loop {
        assert!(
            Instant::now() < deadline,
            "no publication after the restart"
        );
        let _ = store.publish("events", Bytes::from_static(b"after")).await;
        match tokio::time::timeout(Duration::from_millis(200), watch.next()).await {
            Ok(Some(Notice::Gap)) => gap = true,
            Ok(Some(Notice::Message(m))) if m == "after" => break,
            Ok(None) => panic!("the subscription ended"),
            _ => {}
        }
    }
    assert!(gap, "the subscriber was told it may have missed messages");
    drop(cluster);
}

/// A cluster URL whose nodes are gone is `Unavailable`, not a panic.
#[tokio::test]
async fn redis_cluster_down_is_unavailable() {
    use draughts_store::{ErrorCode, open_live_store};
    let port = draughts_testkit::free_port().unwrap();
    let err = open_live_store(&format!("redis+cluster://127.0.0.1:{port}/"), "x:")
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Unavailable, "{err}");
}

/// A Redis that is gone is `Unavailable`, not a panic.
#[tokio::test]
async fn redis_down_is_unavailable() {
    use draughts_store::{ErrorCode, open_live_store};
    let port = draughts_testkit::free_port().unwrap();
    let err = open_live_store(&format!("redis://127.0.0.1:{port}/"), "x:")
        .await
        .unwrap_err();
    assert_eq!(err.code(), ErrorCode::Unavailable, "{err}");
}

/// A raw connection to the test server, to look at it from outside the store.
async fn admin(server: &RedisServer) -> ::redis::aio::MultiplexedConnection {
    ::redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// How many pub/sub clients the server has (`CLIENT LIST TYPE pubsub`).
async fn pubsub_clients(admin: &mut ::redis::aio::MultiplexedConnection) -> usize {
    let list: String = ::redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(admin)
        .await
        .unwrap();
    list.lines().filter(|line| !line.trim().is_empty()).count()
}

/// A field of `INFO stats` as a number.
async fn info_stat(admin: &mut ::redis::aio::MultiplexedConnection, field: &str) -> u64 {
    let info: String = ::redis::cmd("INFO")
        .arg("stats")
        .query_async(admin)
        .await
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO stats"))
}

/// Redis only: every subscription of a store, of one channel or of many, shares ONE pub/sub
/// connection; the last unsubscription leaves the channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_subscriptions_share_one_connection() {
    use draughts_store::{Bytes, Notice};
    use futures_util::StreamExt;
    let server = RedisServer::start().expect("start redis-server");
    let store = RedisStore::connect(&server.url(), "fan:").await.unwrap();
    let mut admin = admin(&server).await;
    let mut subscriptions = Vec::new();
    for n in 0..300 {
        subscriptions.push(store.subscribe("one-game").await.unwrap());
        subscriptions.push(store.subscribe(&format!("game-{n}")).await.unwrap());
    }
    // A clone of the store shares the connection too.
    let clone = store.clone();
    subscriptions.push(clone.subscribe("one-game").await.unwrap());
    assert_eq!(
        pubsub_clients(&mut admin).await,
        1,
        "one pub/sub connection"
    );
    let counts = store.pubsub_counts();
    assert_eq!(
        (
            counts.connections_opened,
            counts.channels,
            counts.subscribers
        ),
        (1, 301, 601)
    );
    let numsub: (String, u64) = ::redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("fan:chan:one-game")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(numsub.1, 1, "Redis sees one subscriber of the channel");
    store
        .publish("one-game", Bytes::from_static(b"m"))
        .await
        .unwrap();
    for subscription in subscriptions.iter_mut().step_by(2) {
        let got = tokio::time::timeout(Duration::from_secs(10), subscription.next()).await;
        assert_eq!(
            got.unwrap(),
            Some(Notice::Message(Bytes::from_static(b"m")))
        );
    }
    subscriptions.clear();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let numsub: (String, u64) = ::redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg("fan:chan:one-game")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert_eq!(
        numsub.1, 0,
        "unsubscribed when the last local subscriber left"
    );
    let counts = store.pubsub_counts();
    assert_eq!((counts.channels, counts.subscribers), (0, 0));
}

/// Redis only: a killed pub/sub connection is re-established (with backoff), every channel
/// subscribed again, each subscriber woken once with a Gap, and later messages delivered. Killing
/// it again and again costs a bounded number of reconnections, never a busy loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn redis_killed_pubsub_connection_is_reestablished() {
    use draughts_store::{Bytes, Notice};
    use futures_util::StreamExt;
    let server = RedisServer::start().expect("start redis-server");
    let store = RedisStore::connect(&server.url(), "kill:").await.unwrap();
    let mut admin = admin(&server).await;
    let mut first = store.subscribe("g1").await.unwrap();
    let mut second = store.subscribe("g1").await.unwrap();
    let mut other = store.subscribe("g2").await.unwrap();
    let kill = || {
        ::redis::cmd("CLIENT")
            .arg("KILL")
            .arg("TYPE")
            .arg("pubsub")
            .to_owned()
    };
    let killed: u64 = kill().query_async(&mut admin).await.unwrap();
    assert_eq!(killed, 1);
    for subscription in [&mut first, &mut second, &mut other] {
        let got = tokio::time::timeout(Duration::from_secs(10), subscription.next()).await;
        assert_eq!(
            got.unwrap(),
            Some(Notice::Gap),
            "woken once after re-subscribing"
        );
    }
    assert_eq!(pubsub_clients(&mut admin).await, 1);
    store
        .publish("g1", Bytes::from_static(b"later"))
        .await
        .unwrap();
    store
        .publish("g2", Bytes::from_static(b"other"))
        .await
        .unwrap();
    for (subscription, text) in [
        (&mut first, "later"),
        (&mut second, "later"),
        (&mut other, "other"),
    ] {
        let got = tokio::time::timeout(Duration::from_secs(10), subscription.next()).await;
        assert_eq!(
            got.unwrap(),
            Some(Notice::Message(Bytes::copy_from_slice(text.as_bytes())))
        );
    }
    let counts = store.pubsub_counts();
    assert_eq!((counts.connections_opened, counts.connections_lost), (2, 1));

    // Kill every 20 ms for 3 s: the backoff doubles (100 ms, 200 ms, ... with jitter), so the
    // store reconnects a handful of times, not once per kill, and sends few commands.
    let connections_before = info_stat(&mut admin, "total_connections_received").await;
    let commands_before = info_stat(&mut admin, "total_commands_processed").await;
    let until = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < until {
        let _: u64 = kill().query_async(&mut admin).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let reconnections =
        info_stat(&mut admin, "total_connections_received").await - connections_before;
    let commands = info_stat(&mut admin, "total_commands_processed").await - commands_before;
    assert!(reconnections <= 8, "{reconnections} reconnections in 3 s");
    // About 150 CLIENT KILLs and 2 INFOs are ours; the store adds a few per reconnection.
    assert!(commands <= 200, "{commands} commands in 3 s");
    // Each subscriber saw only Gaps, a bounded number of them.
    let mut gaps = 0;
    while let Ok(Some(notice)) = tokio::time::timeout(Duration::from_millis(50), first.next()).await
    {
        assert_eq!(notice, Notice::Gap);
        gaps += 1;
    }
    assert!(gaps <= 8, "{gaps} gaps");
    // Once the kills stop, the connection comes back and delivers again.
    tokio::time::sleep(draughts_store::pubsub::BACKOFF_MAX + Duration::from_secs(1)).await;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_millis(50), first.next()).await {}
    store
        .publish("g1", Bytes::from_static(b"back"))
        .await
        .unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), first.next()).await;
    assert_eq!(
        got.unwrap(),
        Some(Notice::Message(Bytes::from_static(b"back")))
    );
    assert_eq!(pubsub_clients(&mut admin).await, 1);
}

pub mod checks {
    use std::collections::HashSet;
    use std::time::{Duration, Instant};

    use draughts_store::{
        Bytes, Effect, EntryId, ErrorCode, GroupInfo, Notice, ReadFrom, SUBSCRIBER_BUFFER,
        StoreError, StreamCaps, Trimmed, now_unix_ms,
    };
    use futures_util::StreamExt;

    use super::Store;

    fn bytes(text: &str) -> Bytes {
        Bytes::copy_from_slice(text.as_bytes())
    }

    /// Awaits `future`, failing the test if it takes longer than 10 s.
    async fn soon<T>(future: impl std::future::Future<Output = T>) -> T {
        tokio::time::timeout(Duration::from_secs(10), future)
            .await
            .expect("operation hung")
    }

    pub async fn kv_versions_and_delete(store: Store) {
        assert_eq!(store.get("game:1").await.unwrap(), None);
        let v1 = store.put("game:1", bytes("a"), None, None).await.unwrap();
        assert_eq!(v1, 1);
        assert_eq!(store.get("game:1").await.unwrap(), Some((bytes("a"), 1)));
        let v2 = store
            .put("game:1", bytes("b"), Some(v1), None)
            .await
            .unwrap();
        assert_eq!(v2, 2);
        // Binary payloads survive unchanged.
        let binary = Bytes::from_static(&[0, 255, 13, 10, 0]);
        let v3 = store
            .put("game:1", binary.clone(), Some(v2), None)
            .await
            .unwrap();
        assert_eq!(store.get("game:1").await.unwrap(), Some((binary, v3)));
        // Create-only on an existing key, and a stale version, both conflict.
        match store.put("game:1", bytes("x"), None, None).await {
            Err(StoreError::Conflict { actual, .. }) => assert_eq!(actual, Some(v3)),
            other => panic!("expected a conflict, got {other:?}"),
        }
        match store.put("game:1", bytes("x"), Some(v1), None).await {
            Err(StoreError::Conflict {
                expected, actual, ..
            }) => {
                assert_eq!(expected, Some(v1));
                assert_eq!(actual, Some(v3));
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
        // Updating a missing key conflicts with actual = None.
        match store.put("missing", bytes("x"), Some(1), None).await {
            Err(StoreError::Conflict { actual, .. }) => assert_eq!(actual, None),
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert!(store.delete("game:1").await.unwrap());
        assert!(!store.delete("game:1").await.unwrap());
        assert_eq!(store.get("game:1").await.unwrap(), None);
        assert_eq!(
            store
                .put("game:1", bytes("again"), None, None)
                .await
                .unwrap(),
            1
        );
    }

    pub async fn cas_race_has_one_winner(store: Store) {
        const N_WRITERS: usize = 16;
        // Racing creations of a new key.
        let mut tasks = Vec::new();
        for writer in 0..N_WRITERS {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                store
                    .put("race", bytes(&format!("w{writer}")), None, None)
                    .await
            }));
        }
        let mut n_won = 0;
        for task in tasks {
            match task.await.unwrap() {
                Ok(version) => {
                    assert_eq!(version, 1);
                    n_won += 1;
                }
                Err(err) => assert_eq!(err.code(), ErrorCode::Conflict, "{err}"),
            }
        }
        assert_eq!(n_won, 1, "exactly one creator wins");
        // Racing updates from the same version, several rounds.
        for round in 1..=5u64 {
            let mut tasks = Vec::new();
            for writer in 0..N_WRITERS {
                let store = store.clone();
                tasks.push(tokio::spawn(async move {
                    let value = bytes(&format!("round {round} writer {writer}"));
                    store
                        .put("race", value.clone(), Some(round), None)
                        .await
                        .map(|version| (version, value))
                }));
            }
            let mut winners = Vec::new();
            for task in tasks {
                match task.await.unwrap() {
                    Ok(won) => winners.push(won),
                    Err(StoreError::Conflict { actual, .. }) => {
                        assert_eq!(actual, Some(round + 1))
                    }
                    Err(other) => panic!("unexpected error {other}"),
                }
            }
            assert_eq!(winners.len(), 1, "round {round}: exactly one writer wins");
            let (version, value) = winners.remove(0);
            assert_eq!(version, round + 1);
            assert_eq!(store.get("race").await.unwrap(), Some((value, version)));
        }
    }

    pub async fn kv_ttl_expires(store: Store) {
        let ttl = Duration::from_millis(500);
        let v1 = store
            .put("short", bytes("a"), None, Some(ttl))
            .await
            .unwrap();
        assert!(store.get("short").await.unwrap().is_some());
        // A put without TTL removes the TTL.
        store
            .put("kept", bytes("a"), None, Some(ttl))
            .await
            .unwrap();
        store.put("kept", bytes("b"), Some(1), None).await.unwrap();
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(store.get("short").await.unwrap(), None);
        assert_eq!(store.get("kept").await.unwrap(), Some((bytes("b"), 2)));
        // An expired key counts as absent for compare-and-set.
        assert!(
            store
                .put("short", bytes("x"), Some(v1), None)
                .await
                .is_err()
        );
        assert_eq!(store.put("short", bytes("x"), None, None).await.unwrap(), 1);
    }

    pub async fn lease_is_exclusive_and_expires(store: Store) {
        let ttl = Duration::from_secs(10);
        assert!(store.lease("pool:blitz", "replica-a", ttl).await.unwrap());
        assert!(!store.lease("pool:blitz", "replica-b", ttl).await.unwrap());
        // The holder renews.
        assert!(store.lease("pool:blitz", "replica-a", ttl).await.unwrap());
        // Only the holder releases.
        assert!(!store.release("pool:blitz", "replica-b").await.unwrap());
        assert!(!store.lease("pool:blitz", "replica-b", ttl).await.unwrap());
        assert!(store.release("pool:blitz", "replica-a").await.unwrap());
        assert!(!store.release("pool:blitz", "replica-a").await.unwrap());
        assert!(store.lease("pool:blitz", "replica-b", ttl).await.unwrap());

        // Many contenders at once: one holder.
        let mut tasks = Vec::new();
        for contender in 0..12 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                store
                    .lease("pool:rapid", &format!("c{contender}"), ttl)
                    .await
                    .unwrap()
            }));
        }
        let mut n_holders = 0;
        for task in tasks {
            if task.await.unwrap() {
                n_holders += 1;
            }
        }
        assert_eq!(n_holders, 1);

        // Expiry frees the lease for another owner.
        let short = Duration::from_millis(500);
        assert!(store.lease("pool:bullet", "crashed", short).await.unwrap());
        assert!(!store.lease("pool:bullet", "other", short).await.unwrap());
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert!(store.lease("pool:bullet", "other", ttl).await.unwrap());
        assert!(!store.release("pool:bullet", "crashed").await.unwrap());
    }

    pub async fn group_delivers_each_entry_once_and_acks(store: Store) {
        store.ensure_group("jobs", "workers").await.unwrap();
        // Idempotent.
        store.ensure_group("jobs", "workers").await.unwrap();
        let mut ids = Vec::new();
        for n in 0..6 {
            ids.push(
                store
                    .append("jobs", bytes(&format!("job {n}")))
                    .await
                    .unwrap(),
            );
        }
        assert!(ids.windows(2).all(|pair| pair[0] < pair[1]), "ids increase");
        assert_eq!(store.len("jobs").await.unwrap(), 6);

        let first = store
            .read_group("jobs", "workers", "w1", 4, Duration::ZERO)
            .await
            .unwrap();
        let second = store
            .read_group("jobs", "workers", "w2", 10, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(first.len(), 4);
        assert_eq!(second.len(), 2);
        let delivered: Vec<EntryId> = first.iter().chain(&second).map(|entry| entry.id).collect();
        assert_eq!(delivered, ids, "each entry delivered once, in order");
        assert_eq!(first[0].payload, bytes("job 0"));
        assert!(
            store
                .read_group("jobs", "workers", "w1", 10, Duration::ZERO)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.pending_count("jobs", "workers").await.unwrap(), 6);

        let first_ids: Vec<EntryId> = first.iter().map(|entry| entry.id).collect();
        assert_eq!(store.ack("jobs", "workers", &first_ids).await.unwrap(), 4);
        assert_eq!(store.ack("jobs", "workers", &first_ids).await.unwrap(), 0);
        assert_eq!(store.ack("jobs", "workers", &[]).await.unwrap(), 0);
        assert_eq!(store.pending_count("jobs", "workers").await.unwrap(), 2);

        // A second group sees every entry, including those appended before it existed.
        store.ensure_group("jobs", "auditors").await.unwrap();
        let audited = store
            .read_group("jobs", "auditors", "a1", 100, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(audited.len(), 6);
        // Acks of one group do not touch another.
        assert_eq!(store.pending_count("jobs", "workers").await.unwrap(), 2);
    }

    pub async fn crashed_consumer_entries_are_claimed(store: Store) {
        store.ensure_group("analysis", "workers").await.unwrap();
        for n in 0..3 {
            store
                .append("analysis", bytes(&format!("position {n}")))
                .await
                .unwrap();
        }
        // The "crashing" worker reads and never acks.
        let taken = store
            .read_group("analysis", "workers", "crashed", 10, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(taken.len(), 3);
        // Not idle long enough yet.
        let early = store
            .claim_idle(
                "analysis",
                "workers",
                "rescuer",
                Duration::from_secs(30),
                10,
            )
            .await
            .unwrap();
        assert!(early.is_empty());
        tokio::time::sleep(Duration::from_millis(700)).await;
        let min_idle = Duration::from_millis(500);
        let claimed_two = store
            .claim_idle("analysis", "workers", "rescuer", min_idle, 2)
            .await
            .unwrap();
        assert_eq!(claimed_two, taken[..2].to_vec());
        let claimed_rest = store
            .claim_idle("analysis", "workers", "rescuer", min_idle, 10)
            .await
            .unwrap();
        assert_eq!(claimed_rest, taken[2..].to_vec());
        // Claiming resets the idle time: nothing left to claim at once.
        assert!(
            store
                .claim_idle("analysis", "workers", "third", min_idle, 10)
                .await
                .unwrap()
                .is_empty()
        );
        let ids: Vec<EntryId> = taken.iter().map(|entry| entry.id).collect();
        assert_eq!(store.ack("analysis", "workers", &ids).await.unwrap(), 3);
        assert_eq!(store.pending_count("analysis", "workers").await.unwrap(), 0);
    }

    pub async fn backlog_counts_what_the_group_was_not_handed(store: Store) {
        let missing = store.backlog("queue", "workers").await.unwrap_err();
        assert_eq!(missing.code(), draughts_store::ErrorCode::NotFound);
        store.ensure_group("queue", "workers").await.unwrap();
        assert_eq!(
            store.backlog("queue", "workers").await.unwrap(),
            draughts_store::Backlog::default()
        );
        let mut ids = Vec::new();
        for n in 0..5 {
            ids.push(
                store
                    .append("queue", bytes(&format!("job {n}")))
                    .await
                    .unwrap(),
            );
        }
        let backlog = store.backlog("queue", "workers").await.unwrap();
        assert_eq!((backlog.waiting, backlog.oldest), (5, Some(ids[0])));
        let taken = store
            .read_group("queue", "workers", "w1", 2, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(taken.len(), 2);
        // Delivered entries leave the backlog whether acked or not.
        let backlog = store.backlog("queue", "workers").await.unwrap();
        assert_eq!((backlog.waiting, backlog.oldest), (3, Some(ids[2])));
        store.ack("queue", "workers", &[taken[0].id]).await.unwrap();
        assert_eq!(store.backlog("queue", "workers").await.unwrap().waiting, 3);
        // Another group has its own backlog.
        store.ensure_group("queue", "auditors").await.unwrap();
        assert_eq!(store.backlog("queue", "auditors").await.unwrap().waiting, 5);
        let missing_group = store.backlog("queue", "nobody").await.unwrap_err();
        assert_eq!(missing_group.code(), draughts_store::ErrorCode::NotFound);
        store
            .read_group("queue", "workers", "w1", 10, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(
            store.backlog("queue", "workers").await.unwrap(),
            draughts_store::Backlog::default()
        );
    }

    pub async fn append_bounded_stops_at_the_waiting_bound(store: Store) {
        let missing = store
            .append_bounded("queue", "workers", 2, bytes("x"))
            .await
            .unwrap_err();
        assert_eq!(missing.code(), draughts_store::ErrorCode::NotFound);
        store.ensure_group("queue", "workers").await.unwrap();
        let missing_group = store
            .append_bounded("queue", "nobody", 2, bytes("x"))
            .await
            .unwrap_err();
        assert_eq!(missing_group.code(), draughts_store::ErrorCode::NotFound);
        let first = store
            .append_bounded("queue", "workers", 2, bytes("job 0"))
            .await
            .unwrap()
            .expect("room for the first");
        let second = store
            .append_bounded("queue", "workers", 2, bytes("job 1"))
            .await
            .unwrap()
            .expect("room for the second");
        assert!(second > first);
        // Full: nothing is appended.
        assert_eq!(
            store
                .append_bounded("queue", "workers", 2, bytes("job 2"))
                .await
                .unwrap(),
            None
        );
        assert_eq!(store.len("queue").await.unwrap(), 2);
        // A delivered entry no longer waits, acknowledged or not: room for one more.
        let taken = store
            .read_group("queue", "workers", "w1", 1, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(taken[0].id, first);
        let third = store
            .append_bounded("queue", "workers", 2, bytes("job 3"))
            .await
            .unwrap()
            .expect("room after a delivery");
        assert_eq!(
            store
                .append_bounded("queue", "workers", 2, bytes("job 4"))
                .await
                .unwrap(),
            None
        );
        // Another group's backlog does not count; a bound of 0 never appends.
        store.ensure_group("queue", "auditors").await.unwrap();
        assert_eq!(
            store
                .append_bounded("queue", "workers", 0, bytes("job 5"))
                .await
                .unwrap(),
            None
        );
        // The entry appended is the payload, delivered as any other.
        let rest = store
            .read_group("queue", "workers", "w1", 10, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(
            rest.iter()
                .map(|e| (e.id, e.payload.clone()))
                .collect::<Vec<_>>(),
            vec![(second, bytes("job 1")), (third, bytes("job 3"))]
        );
        // Concurrent writers never pass the bound together.
        store.ensure_group("race", "workers").await.unwrap();
        let writers: Vec<_> = (0..16)
            .map(|n| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .append_bounded("race", "workers", 5, bytes(&format!("w{n}")))
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut appended = 0;
        for writer in writers {
            appended += usize::from(writer.await.unwrap().is_some());
        }
        assert_eq!(appended, 5);
        assert_eq!(store.len("race").await.unwrap(), 5);
    }

    pub async fn read_groups_waits_on_several_streams_at_once(store: Store) {
        let streams = ["jobs.{q}.high", "jobs.{q}.low"];
        for stream in streams {
            store.ensure_group(stream, "workers").await.unwrap();
        }
        // Nothing there: the call waits, and an append to either stream ends the wait at once.
        for (index, stream) in streams.iter().enumerate().rev() {
            let reader = {
                let store = store.clone();
                tokio::spawn(async move {
                    let started = Instant::now();
                    let got = store
                        .read_groups(&streams, "workers", "w1", 1, Duration::from_secs(8))
                        .await
                        .unwrap();
                    (got, started.elapsed())
                })
            };
            tokio::time::sleep(Duration::from_millis(200)).await;
            let id = store.append(stream, bytes("job")).await.unwrap();
            let (got, waited) = soon(reader).await.unwrap();
            assert_eq!(got.len(), 1, "{got:?}");
            assert_eq!((got[0].0, got[0].1.id), (index, id));
            assert!(
                waited < Duration::from_secs(4),
                "woken by the append: {waited:?}"
            );
        }
        // Entries in both: up to `max` of each, tagged with their stream; delivered once.
        store.append(streams[0], bytes("h1")).await.unwrap();
        store.append(streams[1], bytes("l1")).await.unwrap();
        store.append(streams[1], bytes("l2")).await.unwrap();
        let got = store
            .read_groups(&streams, "workers", "w1", 1, Duration::ZERO)
            .await
            .unwrap();
        let tagged: Vec<(usize, Bytes)> = got.into_iter().map(|(i, e)| (i, e.payload)).collect();
        assert_eq!(tagged, [(0, bytes("h1")), (1, bytes("l1"))]);
        let got = store
            .read_groups(&streams, "workers", "w2", 5, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].0, &got[0].1.payload), (1, &bytes("l2")));
        assert!(
            store
                .read_groups(&streams, "workers", "w1", 5, Duration::from_millis(100))
                .await
                .unwrap()
                .is_empty(),
            "a blocked read that nothing wakes times out empty"
        );
        assert_eq!(store.pending_count(streams[1], "workers").await.unwrap(), 3);
        // Streams of different groups, or none, are refused.
        let apart = store
            .read_groups(&["a", "b"], "workers", "w1", 1, Duration::ZERO)
            .await
            .unwrap_err();
        assert_eq!(apart.code(), ErrorCode::InvalidArgument, "{apart}");
        let none = store
            .read_groups(&[], "workers", "w1", 1, Duration::ZERO)
            .await
            .unwrap_err();
        assert_eq!(none.code(), ErrorCode::InvalidArgument, "{none}");
    }

    pub async fn blocking_read_is_woken_by_append(store: Store) {
        store.ensure_group("moves", "referee").await.unwrap();
        let block = Duration::from_secs(8);
        let reader = {
            let store = store.clone();
            tokio::spawn(async move {
                let started = Instant::now();
                let entries = store
                    .read_group("moves", "referee", "r1", 10, block)
                    .await
                    .unwrap();
                (entries, started.elapsed())
            })
        };
        // Several blocked readers at once must not stall ordinary commands.
        let other_reader = {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .read_after("other", ReadFrom::Latest, 10, Duration::from_secs(2))
                    .await
                    .unwrap()
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        let quick = Instant::now();
        store
            .put("unrelated", bytes("x"), None, None)
            .await
            .unwrap();
        assert!(
            quick.elapsed() < Duration::from_secs(1),
            "commands not stalled"
        );
        let id = store.append("moves", bytes("32-28")).await.unwrap();
        let (entries, waited) = soon(reader).await.unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].id, id);
        assert_eq!(entries[0].payload, bytes("32-28"));
        assert!(waited < block, "woken by the append, not the timeout");
        assert!(soon(other_reader).await.unwrap().is_empty());
    }

    pub async fn blocking_read_times_out_empty(store: Store) {
        store.ensure_group("quiet", "g").await.unwrap();
        let started = Instant::now();
        let entries = store
            .read_group("quiet", "g", "c", 10, Duration::from_millis(300))
            .await
            .unwrap();
        assert!(entries.is_empty());
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(250), "waited {waited:?}");
        assert!(waited < Duration::from_secs(5), "waited {waited:?}");
        let started = Instant::now();
        let tailed = store
            .read_after(
                "quiet",
                ReadFrom::After(EntryId::ZERO),
                10,
                Duration::from_millis(300),
            )
            .await
            .unwrap();
        assert!(tailed.is_empty());
        assert!(started.elapsed() >= Duration::from_millis(250));
    }

    pub async fn tail_follows_new_entries(store: Store) {
        let old = store.append("game:9:events", bytes("old")).await.unwrap();
        // `Latest` without waiting returns nothing; with waiting, only new entries.
        assert!(
            store
                .read_after("game:9:events", ReadFrom::Latest, 10, Duration::ZERO)
                .await
                .unwrap()
                .is_empty()
        );
        let watcher = {
            let store = store.clone();
            tokio::spawn(async move {
                let first = store
                    .read_after(
                        "game:9:events",
                        ReadFrom::Latest,
                        10,
                        Duration::from_secs(8),
                    )
                    .await
                    .unwrap();
                let last = first.last().expect("one entry").id;
                let mut seen: Vec<Bytes> = first.into_iter().map(|entry| entry.payload).collect();
                let mut cursor = last;
                while seen.len() < 3 {
                    let more = store
                        .read_after(
                            "game:9:events",
                            ReadFrom::After(cursor),
                            10,
                            Duration::from_secs(8),
                        )
                        .await
                        .unwrap();
                    for entry in more {
                        assert!(entry.id > cursor);
                        cursor = entry.id;
                        seen.push(entry.payload);
                    }
                }
                seen
            })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        for text in ["move 1", "move 2", "move 3"] {
            store.append("game:9:events", bytes(text)).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let seen = soon(watcher).await.unwrap();
        assert_eq!(
            seen,
            vec![bytes("move 1"), bytes("move 2"), bytes("move 3")]
        );
        // From an id: everything after it, immediately.
        let after_old = store
            .read_after(
                "game:9:events",
                ReadFrom::After(old),
                10,
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(after_old.len(), 3);
    }

    pub async fn range_pages_through_history(store: Store) {
        assert!(store.range("history", None, 10).await.unwrap().is_empty());
        assert_eq!(store.len("history").await.unwrap(), 0);
        let mut ids = Vec::new();
        for n in 0..7 {
            ids.push(
                store
                    .append("history", bytes(&format!("e{n}")))
                    .await
                    .unwrap(),
            );
        }
        let all = store.range("history", None, 100).await.unwrap();
        assert_eq!(all.iter().map(|entry| entry.id).collect::<Vec<_>>(), ids);
        // Page by 3 with the last id as cursor.
        let mut paged = Vec::new();
        let mut cursor = None;
        loop {
            let page = store.range("history", cursor, 3).await.unwrap();
            if page.is_empty() {
                break;
            }
            assert!(page.len() <= 3);
            cursor = page.last().map(|entry| entry.id);
            paged.extend(page);
        }
        assert_eq!(paged, all);
        // Ids print and parse as MS-SEQ.
        let text = ids[3].to_string();
        assert_eq!(text.parse::<EntryId>().unwrap(), ids[3]);
        assert!("nope".parse::<EntryId>().is_err());
    }

    pub async fn trim_keeps_the_newest(store: Store) {
        assert_eq!(store.trim("log", 10).await.unwrap(), 0);
        store.ensure_group("log", "g").await.unwrap();
        let mut ids = Vec::new();
        for n in 0..10 {
            ids.push(store.append("log", bytes(&format!("e{n}"))).await.unwrap());
        }
        // The oldest three are delivered and left pending, then trimmed away.
        let taken = store
            .read_group("log", "g", "c", 3, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(taken.len(), 3);
        assert_eq!(store.trim("log", 6).await.unwrap(), 4);
        assert_eq!(store.len("log").await.unwrap(), 6);
        let kept: Vec<EntryId> = store
            .range("log", None, 100)
            .await
            .unwrap()
            .iter()
            .map(|entry| entry.id)
            .collect();
        assert_eq!(kept, ids[4..].to_vec());
        // Trimmed pending entries are not handed out again.
        let claimed = store
            .claim_idle("log", "g", "other", Duration::ZERO, 10)
            .await
            .unwrap();
        assert!(claimed.is_empty(), "claimed trimmed entries: {claimed:?}");
        assert_eq!(store.pending_count("log", "g").await.unwrap(), 0);
    }

    fn message(text: &str) -> Option<Notice> {
        Some(Notice::Message(bytes(text)))
    }

    pub async fn pubsub_reaches_two_subscribers(store: Store) {
        let mut first = store.subscribe("game:5:watch").await.unwrap();
        let mut second = store.subscribe("game:5:watch").await.unwrap();
        let mut unrelated = store.subscribe("game:6:watch").await.unwrap();
        let n_received = store
            .publish("game:5:watch", bytes("clock 1"))
            .await
            .unwrap();
        assert_eq!(n_received, 1, "one subscribed process");
        store
            .publish("game:5:watch", bytes("clock 2"))
            .await
            .unwrap();
        for subscription in [&mut first, &mut second] {
            assert_eq!(soon(subscription.next()).await, message("clock 1"));
            assert_eq!(soon(subscription.next()).await, message("clock 2"));
        }
        assert_eq!(
            store.publish("nobody", bytes("lost")).await.unwrap(),
            0,
            "no subscriber, no delivery"
        );
        let nothing = tokio::time::timeout(Duration::from_millis(200), unrelated.next()).await;
        assert!(nothing.is_err(), "other channels receive nothing");
        // A dropped subscriber leaves the others subscribed; the last one unsubscribes.
        drop(second);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(store.publish("game:5:watch", bytes("c3")).await.unwrap(), 1);
        assert_eq!(soon(first.next()).await, message("c3"));
        drop(first);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(store.publish("game:5:watch", bytes("c4")).await.unwrap(), 0);
    }

    pub async fn pubsub_fans_out_to_many_subscribers_and_channels(store: Store) {
        // 200 subscribers of one channel, and 100 channels with two subscribers each.
        let mut crowd = Vec::new();
        for _ in 0..200 {
            crowd.push(store.subscribe("popular").await.unwrap());
        }
        let mut pairs = Vec::new();
        for n in 0..100 {
            let channel = format!("game-{n}");
            let first = store.subscribe(&channel).await.unwrap();
            let second = store.subscribe(&channel).await.unwrap();
            pairs.push((channel, first, second));
        }
        assert_eq!(store.publish("popular", bytes("m1")).await.unwrap(), 1);
        for (channel, _, _) in &pairs {
            assert_eq!(store.publish(channel, bytes(channel)).await.unwrap(), 1);
        }
        for subscription in &mut crowd {
            assert_eq!(soon(subscription.next()).await, message("m1"));
        }
        for (channel, first, second) in &mut pairs {
            assert_eq!(soon(first.next()).await, message(channel));
            assert_eq!(soon(second.next()).await, message(channel));
        }
        // Half the crowd leaves: the rest still hear, in order.
        crowd.truncate(100);
        pairs.truncate(50);
        tokio::time::sleep(Duration::from_millis(200)).await;
        store.publish("popular", bytes("m2")).await.unwrap();
        store.publish("popular", bytes("m3")).await.unwrap();
        for subscription in &mut crowd {
            assert_eq!(soon(subscription.next()).await, message("m2"));
            assert_eq!(soon(subscription.next()).await, message("m3"));
        }
        assert_eq!(store.publish("game-99", bytes("x")).await.unwrap(), 0);
        assert_eq!(store.publish("game-0", bytes("y")).await.unwrap(), 1);
    }

    pub async fn lagging_subscriber_gets_a_gap(store: Store) {
        let mut slow = store.subscribe("busy").await.unwrap();
        let mut fast = store.subscribe("busy").await.unwrap();
        let n_sent = SUBSCRIBER_BUFFER + 50;
        let reader = tokio::spawn(async move {
            let mut seen = 0;
            while seen < n_sent {
                match soon(fast.next()).await {
                    Some(Notice::Message(_)) => seen += 1,
                    other => panic!("the fast reader got {other:?}"),
                }
            }
        });
        for n in 0..n_sent {
            store.publish("busy", bytes(&format!("{n}"))).await.unwrap();
            if n % 64 == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        soon(reader).await.unwrap();
        // The slow one never read: it gets one Gap, then the newest messages in order.
        assert_eq!(soon(slow.next()).await, Some(Notice::Gap));
        let mut last = None;
        while let Ok(Some(notice)) =
            tokio::time::timeout(Duration::from_millis(200), slow.next()).await
        {
            match notice {
                Notice::Message(payload) => last = Some(payload),
                Notice::Gap => panic!("a second gap without falling behind again"),
            }
        }
        assert_eq!(last, Some(bytes(&format!("{}", n_sent - 1))));
    }

    pub async fn trim_consumed_keeps_what_a_group_needs(store: Store) {
        let caps = StreamCaps {
            max_len: 1_000,
            max_age: Duration::from_secs(3_600),
        };
        assert_eq!(
            store.trim_consumed("done", caps).await.unwrap(),
            Trimmed::default()
        );
        store.ensure_group("done", "ratings").await.unwrap();
        store.ensure_group("done", "archive-check").await.unwrap();
        let mut ids = Vec::new();
        for n in 0..10 {
            ids.push(store.append("done", bytes(&format!("e{n}"))).await.unwrap());
        }
        // ratings: 6 delivered, all acked. archive-check: 4 delivered, the third not acked.
        let taken = store
            .read_group("done", "ratings", "r", 6, Duration::ZERO)
            .await
            .unwrap();
        let acked: Vec<EntryId> = taken.iter().map(|entry| entry.id).collect();
        store.ack("done", "ratings", &acked).await.unwrap();
        let taken = store
            .read_group("done", "archive-check", "a", 4, Duration::ZERO)
            .await
            .unwrap();
        store
            .ack(
                "done",
                "archive-check",
                &[taken[0].id, taken[1].id, taken[3].id],
            )
            .await
            .unwrap();
        let trimmed = store.trim_consumed("done", caps).await.unwrap();
        assert_eq!(
            trimmed,
            Trimmed {
                consumed: 2,
                capped: 0
            },
            "up to the pending e2"
        );
        let kept = store.range("done", None, 100).await.unwrap();
        assert_eq!(kept.first().map(|entry| entry.id), Some(ids[2]));
        // The pending entry is acked: archive-check now needs e4, ratings e6.
        store.ack("done", "archive-check", &[ids[2]]).await.unwrap();
        let trimmed = store.trim_consumed("done", caps).await.unwrap();
        assert_eq!(trimmed.consumed, 2);
        assert_eq!(store.len("done").await.unwrap(), 6);
        // A group that stopped reading is overruled by the length cap.
        let tight = StreamCaps {
            max_len: 3,
            max_age: Duration::from_secs(3_600),
        };
        let trimmed = store.trim_consumed("done", tight).await.unwrap();
        assert_eq!(
            trimmed,
            Trimmed {
                consumed: 0,
                capped: 3
            }
        );
        let kept: Vec<EntryId> = store
            .range("done", None, 100)
            .await
            .unwrap()
            .iter()
            .map(|entry| entry.id)
            .collect();
        assert_eq!(kept, ids[7..].to_vec());
        // ... and by the age cap (every entry here is younger than a minute; wait past 50 ms).
        tokio::time::sleep(Duration::from_millis(60)).await;
        let old = StreamCaps {
            max_len: 1_000,
            max_age: Duration::from_millis(50),
        };
        assert_eq!(store.trim_consumed("done", old).await.unwrap().capped, 3);
        assert_eq!(store.len("done").await.unwrap(), 0);
        // The groups keep working on new entries.
        let fresh = store.append("done", bytes("e10")).await.unwrap();
        let taken = store
            .read_group("done", "ratings", "r", 10, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(
            taken.iter().map(|entry| entry.id).collect::<Vec<_>>(),
            vec![fresh]
        );
    }

    pub async fn groups_report_pending_and_lag(store: Store) {
        assert!(store.groups("nothing").await.unwrap().is_empty());
        store.ensure_group("jobs", "b-workers").await.unwrap();
        store.ensure_group("jobs", "a-workers").await.unwrap();
        let mut ids = Vec::new();
        for n in 0..5 {
            ids.push(store.append("jobs", bytes(&format!("j{n}"))).await.unwrap());
        }
        let taken = store
            .read_group("jobs", "a-workers", "w", 3, Duration::ZERO)
            .await
            .unwrap();
        store
            .ack("jobs", "a-workers", &[taken[0].id])
            .await
            .unwrap();
        let groups = store.groups("jobs").await.unwrap();
        assert_eq!(
            groups,
            vec![
                GroupInfo {
                    name: "a-workers".into(),
                    pending: 2,
                    first_pending: Some(ids[1]),
                    last_delivered: ids[2],
                    lag: Some(2),
                },
                GroupInfo {
                    name: "b-workers".into(),
                    pending: 0,
                    first_pending: None,
                    last_delivered: EntryId::ZERO,
                    lag: Some(5),
                },
            ]
        );
        assert_eq!(groups[0].needs_from(), ids[1]);
        assert_eq!(groups[1].needs_from(), EntryId::new(0, 1));
    }

    pub async fn schedule_len_counts_members(store: Store) {
        assert_eq!(store.schedule_len("flags").await.unwrap(), 0);
        store.schedule("flags", "a", 10).await.unwrap();
        store
            .schedule("flags", "b", 5_000_000_000_000)
            .await
            .unwrap();
        store.schedule("flags", "a", 20).await.unwrap();
        assert_eq!(store.schedule_len("flags").await.unwrap(), 2);
        store.cancel("flags", "a").await.unwrap();
        assert_eq!(store.schedule_len("flags").await.unwrap(), 1);
    }

    pub async fn scheduled_lists_members_in_time_order(store: Store) {
        assert_eq!(store.scheduled("pool", 10).await.unwrap(), vec![]);
        store.schedule("pool", "c", 30).await.unwrap();
        store.schedule("pool", "a", 10).await.unwrap();
        store.schedule("pool", "b", 20).await.unwrap();
        store.schedule("pool", "a", 40).await.unwrap();
        let listed = store.scheduled("pool", 10).await.unwrap();
        let expected = [("b", 20), ("c", 30), ("a", 40)];
        assert_eq!(
            listed,
            expected.map(|(m, at)| (m.to_owned(), at)).to_vec(),
            "listing neither removes nor reorders"
        );
        assert_eq!(store.scheduled("pool", 2).await.unwrap().len(), 2);
        assert_eq!(store.schedule_len("pool").await.unwrap(), 3);
        assert!(
            store.scheduled("pool", 0).await.is_err(),
            "max 0 is refused"
        );
    }

    pub async fn take_due_is_exactly_once_under_concurrency(store: Store) {
        const N_DUE: usize = 300;
        let now = now_unix_ms();
        for n in 0..N_DUE {
            store
                .schedule("clocks", &format!("game:{n}"), now - 1000 + n as u64)
                .await
                .unwrap();
        }
        store
            .schedule("clocks", "future", now + 3_600_000)
            .await
            .unwrap();
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                loop {
                    let batch = store.take_due("clocks", now, 7).await.unwrap();
                    if batch.is_empty() {
                        return mine;
                    }
                    mine.extend(batch);
                    tokio::task::yield_now().await;
                }
            }));
        }
        let mut all = Vec::new();
        for task in tasks {
            all.extend(soon(task).await.unwrap());
        }
        assert_eq!(all.len(), N_DUE, "every due member handed out once");
        let unique: HashSet<&String> = all.iter().collect();
        assert_eq!(unique.len(), N_DUE, "no member handed out twice");
        assert!(!unique.contains(&"future".to_owned()));
        assert_eq!(
            store.next_due("clocks").await.unwrap(),
            Some(("future".to_owned(), now + 3_600_000))
        );
    }

    pub async fn schedule_cancel_and_next_due(store: Store) {
        assert_eq!(store.next_due("flags").await.unwrap(), None);
        assert!(store.take_due("flags", 1_000, 10).await.unwrap().is_empty());
        store.schedule("flags", "g1", 5_000).await.unwrap();
        store.schedule("flags", "g2", 3_000).await.unwrap();
        store.schedule("flags", "g3", 4_000).await.unwrap();
        // Rescheduling moves a member rather than adding it twice.
        store.schedule("flags", "g2", 6_000).await.unwrap();
        assert_eq!(
            store.next_due("flags").await.unwrap(),
            Some(("g3".to_owned(), 4_000))
        );
        assert!(store.cancel("flags", "g3").await.unwrap());
        assert!(!store.cancel("flags", "g3").await.unwrap());
        assert!(store.take_due("flags", 4_999, 10).await.unwrap().is_empty());
        assert_eq!(
            store.take_due("flags", 10_000, 10).await.unwrap(),
            vec!["g1".to_owned(), "g2".to_owned()],
            "earliest first"
        );
        assert_eq!(store.next_due("flags").await.unwrap(), None);
    }

    pub async fn put_with_applies_effects_only_when_it_wins(store: Store) {
        let mut watch = store.subscribe("game-events:7").await.unwrap();
        store.schedule("deadlines", "g7", 1_000).await.unwrap();
        store
            .schedule("deadlines", "{g7}:old", 2_000)
            .await
            .unwrap();
        let effects = [
            Effect::Schedule {
                set: "deadlines".into(),
                member: "g7".into(),
                at_unix_ms: 9_000,
            },
            Effect::Cancel {
                set: "deadlines".into(),
                member: "{g7}:old".into(),
            },
            Effect::Schedule {
                set: "archive".into(),
                member: "g7".into(),
                at_unix_ms: 50,
            },
            Effect::Publish {
                channel: "game-events:7".into(),
                payload: bytes("seq 2"),
            },
        ];
        let v1 = store
            .put_with("game:{g7}", bytes("created"), None, None, &effects[..1])
            .await
            .unwrap();
        assert_eq!(v1, 1);
        // A lost race applies no effect at all.
        let lost = store
            .put_with("game:{g7}", bytes("stale"), Some(5), None, &effects)
            .await
            .unwrap_err();
        assert!(
            matches!(
                lost,
                StoreError::Conflict {
                    actual: Some(1),
                    ..
                }
            ),
            "{lost:?}"
        );
        assert_eq!(
            store.next_due("deadlines").await.unwrap(),
            Some(("{g7}:old".to_owned(), 2_000)),
            "the lost race cancelled nothing"
        );
        assert_eq!(store.next_due("archive").await.unwrap(), None);
        let nothing = tokio::time::timeout(Duration::from_millis(100), watch.next()).await;
        assert!(nothing.is_err(), "the lost race published nothing");
        // The winner applies every effect with the write.
        let v2 = store
            .put_with("game:{g7}", bytes("moved"), Some(v1), None, &effects)
            .await
            .unwrap();
        assert_eq!(v2, 2);
        assert_eq!(
            store.get("game:{g7}").await.unwrap(),
            Some((bytes("moved"), 2))
        );
        assert_eq!(soon(watch.next()).await, message("seq 2"));
        assert_eq!(
            store.take_due("deadlines", 100_000, 10).await.unwrap(),
            vec!["g7".to_owned()],
            "g7 rescheduled to 9000 and '{{g7}}:old' cancelled"
        );
        assert_eq!(
            store.take_due("archive", 100, 10).await.unwrap(),
            vec!["g7".to_owned()]
        );
        // No effects: a plain compare-and-set.
        let v3 = store
            .put_with("game:{g7}", bytes("plain"), Some(v2), None, &[])
            .await
            .unwrap();
        assert_eq!(v3, 3);
    }

    pub async fn put_with_refuses_effects_outside_the_key_group(store: Store) {
        // A spread schedule's member must be in the key's group ...
        let elsewhere = store
            .put_with(
                "game:{g1}",
                bytes("v"),
                None,
                None,
                &[Effect::Schedule {
                    set: "deadlines".into(),
                    member: "g2".into(),
                    at_unix_ms: 1,
                }],
            )
            .await
            .unwrap_err();
        assert_eq!(elsewhere.code(), ErrorCode::InvalidArgument, "{elsewhere}");
        let untagged = store
            .put_with(
                "game:g1",
                bytes("v"),
                None,
                None,
                &[Effect::Cancel {
                    set: "deadlines".into(),
                    member: "g1".into(),
                }],
            )
            .await
            .unwrap_err();
        assert_eq!(untagged.code(), ErrorCode::InvalidArgument, "{untagged}");
        assert_eq!(
            store.get("game:{g1}").await.unwrap(),
            None,
            "nothing written"
        );
        assert_eq!(store.get("game:g1").await.unwrap(), None, "nothing written");
        assert_eq!(store.schedule_len("deadlines").await.unwrap(), 0);
        // ... a pinned schedule (a hash tag in its name) must be in the key's group, any member.
        let member = r#"{"ticket":"t1","rating":1500}"#;
        store
            .put_with(
                "ticket:{mm}t1",
                bytes("waiting"),
                None,
                None,
                &[
                    Effect::Schedule {
                        set: "pool:{mm}blitz".into(),
                        member: member.into(),
                        at_unix_ms: 5,
                    },
                    Effect::Publish {
                        channel: "anywhere".into(),
                        payload: bytes("x"),
                    },
                ],
            )
            .await
            .unwrap();
        assert_eq!(
            store.scheduled("pool:{mm}blitz", 10).await.unwrap(),
            vec![(member.to_owned(), 5)]
        );
        let other_pool = store
            .put_with(
                "ticket:{mm}t2",
                bytes("waiting"),
                None,
                None,
                &[Effect::Schedule {
                    set: "pool:{other}blitz".into(),
                    member: member.into(),
                    at_unix_ms: 5,
                }],
            )
            .await
            .unwrap_err();
        assert_eq!(
            other_pool.code(),
            ErrorCode::InvalidArgument,
            "{other_pool}"
        );
        assert_eq!(store.get("ticket:{mm}t2").await.unwrap(), None);
    }

    pub async fn claimed_due_members_come_back_unless_dealt_with(store: Store) {
        let retry = Duration::from_secs(10);
        for (member, at) in [
            ("g1", 1_000),
            ("g2", 2_000),
            ("g3", 3_000),
            ("later", 90_000),
        ] {
            store.schedule("flags", member, at).await.unwrap();
        }
        // Two claimers at once: each due member goes to exactly one of them.
        let (a, b) = tokio::join!(
            store.claim_due("flags", 5_000, 2, retry),
            store.claim_due("flags", 5_000, 2, retry)
        );
        let mut both: Vec<String> = a.unwrap().into_iter().chain(b.unwrap()).collect();
        both.sort();
        assert_eq!(both, ["g1", "g2", "g3"]);
        assert!(
            store
                .claim_due("flags", 5_000, 10, retry)
                .await
                .unwrap()
                .is_empty(),
            "claimed members are not due again before the retry time"
        );
        // The claimer dealt with g1 (cancelled) and g2 (rescheduled); g3's claimer died.
        assert!(store.cancel("flags", "g1").await.unwrap());
        store.schedule("flags", "g2", 60_000).await.unwrap();
        assert_eq!(
            store.next_due("flags").await.unwrap(),
            Some(("g3".to_owned(), 15_000)),
            "g3 comes back at claim time + retry"
        );
        assert_eq!(
            store.claim_due("flags", 15_000, 10, retry).await.unwrap(),
            ["g3"]
        );
        assert!(matches!(
            store.claim_due("flags", 1, 10, Duration::ZERO).await,
            Err(StoreError::InvalidArgument(_))
        ));
    }

    pub async fn rate_counter_resets_after_window(store: Store) {
        let window = Duration::from_millis(800);
        for expected in 1..=5 {
            assert_eq!(store.hit("ip:10.0.0.1", window).await.unwrap(), expected);
        }
        assert_eq!(store.hit("ip:10.0.0.2", window).await.unwrap(), 1);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert_eq!(store.hit("ip:10.0.0.1", window).await.unwrap(), 1);
        // Concurrent hits are all counted.
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                store.hit("burst", Duration::from_secs(30)).await.unwrap()
            }));
        }
        let mut counts = Vec::new();
        for task in tasks {
            counts.push(task.await.unwrap());
        }
        counts.sort_unstable();
        assert_eq!(counts, (1..=20).collect::<Vec<u64>>());
    }

    pub async fn errors_have_codes(store: Store) {
        let missing_group = store
            .read_group("nowhere", "nobody", "c", 1, Duration::ZERO)
            .await
            .unwrap_err();
        assert_eq!(missing_group.code(), ErrorCode::NotFound, "{missing_group}");
        store.append("exists", bytes("x")).await.unwrap();
        let missing_group = store.pending_count("exists", "nobody").await.unwrap_err();
        assert_eq!(missing_group.code(), ErrorCode::NotFound, "{missing_group}");
        let missing_group = store
            .claim_idle("exists", "nobody", "c", Duration::ZERO, 1)
            .await
            .unwrap_err();
        assert_eq!(missing_group.code(), ErrorCode::NotFound, "{missing_group}");
        let zero_ttl = store
            .put("k", bytes("v"), None, Some(Duration::ZERO))
            .await
            .unwrap_err();
        assert_eq!(zero_ttl.code(), ErrorCode::InvalidArgument);
        let zero_max = store.range("exists", None, 0).await.unwrap_err();
        assert_eq!(zero_max.code(), ErrorCode::InvalidArgument);
        let conflict = store.put("k", bytes("v"), Some(7), None).await.unwrap_err();
        assert_eq!(conflict.code(), ErrorCode::Conflict);
        assert_eq!(conflict.code().as_str(), "conflict");
    }
}
