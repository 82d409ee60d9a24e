//! The typed contract of every message that crosses Redis: for each stream or pub/sub channel, its
//! name, its versioned payload type and its encode/decode, in ONE place that every writer and every
//! reader uses. No service writes a Redis payload by hand.
//!
//! # Streams and channels
//! | name | kind | payload | writer | readers |
//! |---|---|---|---|---|
//! | `games.finished` | stream | [`finished::FinishedV1`] | games (`GamesCore::archive`) | ratings (consumer group `ratings`), analysis (bulk) |
//! | `player-events:{player_id}` | pub/sub | [`player::Signal`] | games (invitations, games started/finished) | games (`WatchPlayerEvents`) |
//! | `players.linked` | stream | [`linked::LinkedV1`] | auth (`LinkGuest`, `SignUp` with a guest) | games (`games-links`), ratings (`ratings-links`) |
//! | `players.erased` | stream | [`erased::ErasedV1`] | auth (`DeleteAccount`) | games (`games-erasures`) |
//!
//! | `mm-ticket:{mm}<id>`, `mm-pool:{mm}<pool>`, `mm-wave:<pool>`, `mm-commits:{mm}`, lobby and stats | keys, schedules, pub/sub | [`matchmaking`] (its own table) | matchmaking | matchmaking replicas |
//! | `analysis.{jobs}.computer`, `.interactive`, `.bulk` | streams (group `analysis-workers`), job records, events, cache | [`analysis`] (its own table) | analysis (API, workers) | analysis workers and API |
//!
//! # Ownership
//! Every table, key, schedule and consumer group private to one service is declared with its owner in
//! [`ownership`]; no other service names it (`crates/proto/tests/ownership.rs`). Other services learn
//! through what the owner publishes: the streams and channels above, and its RPCs.
//!
//! # Versioning rules
//! - Every payload is JSON with a version field `v` (an integer). A reader first reads `v` alone and
//!   refuses (dead-letters) a version it does not know, instead of misreading it.
//! - Readers ignore unknown fields, so a writer may add a field without a new version. A field that
//!   readers need and older writers do not send has a documented default.
//! - A change that renames, removes or changes the meaning of a field is a new version: writers keep
//!   writing the old version until every reader knows the new one.
//! - Entries already on a stream must still decode after a change: the tests decode the documented
//!   example of each version.

pub mod analysis;
pub mod erased;
pub mod finished;
pub mod linked;
pub mod matchmaking;
pub mod ownership;
pub mod player;
pub mod tournaments;
