//! The matchmaking service.
pub mod core;
pub mod error;
pub mod pairing;
pub mod pools;
pub mod ports;
