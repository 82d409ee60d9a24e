//! The ONE behavioural suite of `draughts-store`: every check is written once, generic
//! over the backend, and run against each backend.
//!
//! - `live::checks::*` run on [`MemoryStore`], on [`RedisStore`] (a `redis-server`
//!   started by the test on a free port; one server per test so tests run in parallel) and on
//!   [`RedisStore`] over a 3-primary Redis Cluster (one cluster for the test binary, started on
//!   first use, a key prefix per test).
//! - `db::checks::*` run on in-memory SQLite, on an SQLite file, and on PostgreSQL (one
//!   cluster started by the test, one fresh database per check).
//!
//! Servers come from `draughts-testkit`; the servers on the default ports are never used.

mod db;
mod live;
