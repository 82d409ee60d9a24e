//! Live games: the server referees every game (`draughts.v1.Games`).
//!
//! - [`record`]: the stored game and the pure rules of play around the engine (turns, clocks, offers).
//! - [`service`]: the domain over the shared backends (compare-and-set, schedules, archive, events).
//! - [`invitation`], [`consent`]: invitations (the consent step before a game between two people),
//!   rematches, and the per-player signals behind `WatchPlayerEvents`.
//! - [`blocks`]: players' block lists, honoured by every invitation and acceptance.
//! - [`watch`]: `WatchGame`, one feed per watched game and replica, and the watchers' caps.
//! - [`limits`]: the bounds of games, watchers and the Redis state they leave (flags).
//! - [`pdn`]: PDN export.
//! - [`quota`]: quotas on games against the computer.
//! - [`grpc`]: the gRPC edge (authenticate, convert, call, convert back).

pub mod blocks;
pub mod computer;
pub mod computer_grpc;
pub mod consent;
pub mod grpc;
pub mod invitation;
pub mod limits;
pub mod links;
pub mod pdn;
pub mod player_events;
pub mod published;
pub mod quota;
pub mod record;
pub mod service;
pub mod watch;

pub use limits::GamesLimits;
pub use service::{Clock, GamesCore, GamesError, SystemClock, TokioClock};
