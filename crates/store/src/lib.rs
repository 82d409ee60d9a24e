//! Shared storage and queues for the draughts services: one interface, two backends each.
//!
//! - [`LiveStore`] — live state and queues: a versioned key-value space with
//!   compare-and-set, leases, streams with consumer groups, pub/sub, deadline schedules
//!   and rate counters. Backends: [`RedisStore`] (deployments; all replicas share it) and
//!   [`MemoryStore`] (the one-process embedded mode). Pick one from a URL with
//!   [`open_live_store`].
//! - [`Database`] — durable records in PostgreSQL (deployments) or SQLite (embedded), over
//!   `sqlx::AnyPool`, with [`Migration`]s recorded in `schema_migrations`.
//!
//! A read-change-write of a versioned record goes through [`cas::update`] (compare-and-set, tried
//! again when another writer wins).
//!
//! Both backends of each pass the same behavioural test suite (`tests/suite`), so code
//! written against the interface behaves the same in a cluster and in one process.
//! Errors are one [`StoreError`] enum whose [`code`](StoreError::code) is a stable
//! [`ErrorCode`].
//!
//! This crate knows nothing about games, ratings or gRPC: payloads are opaque bytes, and
//! their schemas (each with a version field, readers ignoring unknown fields) belong to
//! the crates that write them. Redis key names are built only in [`keys`], which
//! documents the layout and the payload conventions, and how names of one *group* (a hash tag,
//! `game:{g7}`) stay in one slot of a Redis Cluster.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use bytes::Bytes;
//! use draughts_store::{open_live_store, ErrorCode};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), draughts_store::StoreError> {
//! let store = open_live_store("memory://", "draughts:").await?;
//!
//! // Compare-and-set: create, then update from the version read.
//! let v1 = store.put("game:7", Bytes::from_static(b"state 1"), None, None).await?;
//! let v2 = store.put("game:7", Bytes::from_static(b"state 2"), Some(v1), None).await?;
//! let stale = store.put("game:7", Bytes::from_static(b"late"), Some(v1), None).await;
//! assert_eq!(stale.unwrap_err().code(), ErrorCode::Conflict);
//! assert_eq!(store.get("game:7").await?, Some((Bytes::from_static(b"state 2"), v2)));
//!
//! // A job queue: append, deliver to one consumer of the group, acknowledge.
//! store.ensure_group("jobs", "workers").await?;
//! store.append("jobs", Bytes::from_static(b"{\"v\":1}")).await?;
//! let jobs = store.read_group("jobs", "workers", "worker-1", 10, Duration::ZERO).await?;
//! store.ack("jobs", "workers", &[jobs[0].id]).await?;
//! assert_eq!(store.pending_count("jobs", "workers").await?, 0);
//! # Ok(())
//! # }
//! ```

mod batch;
pub mod cas;
mod database;
mod error;
pub mod keys;
mod live;
mod memory;
pub mod pubsub;
mod redis_store;

use std::sync::Arc;

pub use batch::take_batch;
pub use bytes::Bytes;
pub use database::{DEFAULT_ACQUIRE_TIMEOUT, Database, DbBackend, Migration};
pub use error::{BoxError, ErrorCode, StoreError};
pub use live::{
    Backlog, Effect, Entry, EntryId, GroupInfo, LiveStore, Notice, ParseEntryIdError, ReadFrom,
    SUBSCRIBER_BUFFER, StreamCaps, Subscription, Trimmed, Version, now_unix_ms,
};
pub use memory::MemoryStore;
pub use pubsub::PubSubCounts;
pub use redis_store::RedisStore;
/// The sqlx version this crate uses, for queries on [`Database::pool`].
pub use sqlx;

/// Opens a live store from a URL: `redis://...` (or `rediss://`, `redis+unix://`,
/// `unix://`) gives a [`RedisStore`] naming its keys under `key_prefix`;
/// `redis+cluster://host:port,host:port/` (or `rediss+cluster://`) a [`RedisStore`] on the Redis
/// Cluster those nodes belong to ([`RedisStore::connect_cluster`]); `memory://` gives a fresh
/// [`MemoryStore`] (the prefix is not needed there).
pub async fn open_live_store(
    url: &str,
    key_prefix: &str,
) -> Result<Arc<dyn LiveStore>, StoreError> {
    if url == "memory://" || url == "memory:" {
        return Ok(Arc::new(MemoryStore::new()));
    }
    if let Some(nodes) = cluster_nodes(url)? {
        return Ok(Arc::new(
            RedisStore::connect_cluster(&nodes, key_prefix).await?,
        ));
    }
    let is_redis = ["redis://", "rediss://", "redis+unix://", "unix://"]
        .iter()
        .any(|scheme| url.starts_with(scheme));
    if is_redis {
        return Ok(Arc::new(RedisStore::connect(url, key_prefix).await?));
    }
    Err(StoreError::InvalidArgument(
        "live store url must be redis://..., redis+cluster://... or memory://".to_owned(),
    ))
}

/// The node URLs of a cluster URL: `redis+cluster://[user:password@]host:port,host:port[/rest]`
/// gives `redis://[user:password@]host:port[/rest]` for each node (`rediss+cluster://` gives
/// `rediss://`); `None` for any other URL.
pub fn cluster_nodes(url: &str) -> Result<Option<Vec<String>>, StoreError> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("redis+cluster://") {
        ("redis", rest)
    } else if let Some(rest) = url.strip_prefix("rediss+cluster://") {
        ("rediss", rest)
    } else {
        return Ok(None);
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => rest.split_at(at),
        None => (rest, ""),
    };
    let (credentials, hosts) = match authority.rsplit_once('@') {
        Some((credentials, hosts)) => (Some(credentials), hosts),
        None => (None, authority),
    };
    let nodes: Vec<String> = hosts
        .split(',')
        .filter(|host| !host.is_empty())
        .map(|host| match credentials {
            Some(credentials) => format!("{scheme}://{credentials}@{host}{path}"),
            None => format!("{scheme}://{host}{path}"),
        })
        .collect();
    if nodes.is_empty() {
        return Err(StoreError::InvalidArgument(
            "a redis+cluster:// url names at least one host:port".to_owned(),
        ));
    }
    Ok(Some(nodes))
}

#[cfg(test)]
mod tests {
    use super::cluster_nodes;

    #[test]
    fn cluster_urls_name_every_node() {
        assert_eq!(cluster_nodes("redis://h:1/").unwrap(), None);
        assert_eq!(
            cluster_nodes("redis+cluster://a:1,b:2/").unwrap().unwrap(),
            ["redis://a:1/", "redis://b:2/"]
        );
        assert_eq!(
            cluster_nodes("rediss+cluster://u:p@a:1,b:2")
                .unwrap()
                .unwrap(),
            ["rediss://u:p@a:1", "rediss://u:p@b:2"]
        );
        assert!(cluster_nodes("redis+cluster:///").is_err());
    }
}
