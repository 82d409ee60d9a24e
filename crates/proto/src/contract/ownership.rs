//! Who owns which storage: every table, key, schedule and consumer group that is private to one
//! service, declared once here with its owner. Another service never names them: it learns what the
//! owner publishes (the streams and channels of this module's siblings, and the owner's RPCs, such as
//! `Games.ListFinishedGames` and `Games.CountGamesInProgress`). `crates/proto/tests/ownership.rs`
//! fails when a service's source names another service's private name, when a private contract module
//! (`matchmaking`, `analysis`, `tournaments`) is used outside its owner, when a service creates a table
//! that is not declared here, or when a declared name is no longer in its owner's source.
//!
//! The published contracts (`games.finished`, `players.linked`, `players.erased`, the players' event
//! channels) are not listed: their writer and readers are in [`super`]'s table.

/// What kind of storage a name is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A database table.
    Table,
    /// A live-store key, or the prefix of a family of keys (as written in the owner's source).
    Key,
    /// A live-store schedule (sorted set).
    Schedule,
    /// A consumer group the owner reads a stream with.
    Group,
}

/// A private name and the service (its directory under `services/`) that owns it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owned {
    pub owner: &'static str,
    pub kind: Kind,
    /// As the owner's source writes it in its string literals.
    pub name: &'static str,
}

const fn owned(owner: &'static str, kind: Kind, name: &'static str) -> Owned {
    Owned { owner, kind, name }
}

/// Every private name of every service.
pub const PRIVATE: &[Owned] = &[
    // Games (services/validation): finished games, live games, their schedules, the players' lists.
    owned("validation", Kind::Table, "finished_games"),
    owned("validation", Kind::Key, "game:{"),
    owned("validation", Kind::Key, "game-events:"),
    owned("validation", Kind::Key, "player-games:"),
    owned("validation", Kind::Key, "player-invitations:"),
    owned("validation", Kind::Key, "player-blocks:"),
    owned("validation", Kind::Key, "invitation:"),
    owned("validation", Kind::Key, "ai-games:"),
    owned("validation", Kind::Schedule, "game-deadlines"),
    owned("validation", Kind::Schedule, "game-computer"),
    owned("validation", Kind::Schedule, "game-archive"),
    owned("validation", Kind::Group, "games-links"),
    owned("validation", Kind::Group, "games-erasures"),
    // Ratings.
    owned("ratings", Kind::Table, "ratings"),
    owned("ratings", Kind::Table, "rating_games"),
    owned("ratings", Kind::Table, "rating_history"),
    owned("ratings", Kind::Table, "rating_periods"),
    owned("ratings", Kind::Table, "rating_reconcile"),
    owned("ratings", Kind::Table, "rating_writer"),
    owned("ratings", Kind::Table, "rating_bots"),
    // Tournaments (its keys are its contract module's).
    owned("tournaments", Kind::Table, "tournaments_archive"),
];

/// The contract modules private to one service (their keys, schedules and payloads are that
/// service's own), by owner.
pub const PRIVATE_CONTRACTS: &[(&str, &str)] = &[
    ("matchmaking", "matchmaking"),
    ("analysis", "analysis"),
    ("tournaments", "tournaments"),
];
