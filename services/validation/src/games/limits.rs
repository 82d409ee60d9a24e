//! The bounds of the games service: what one player, one watcher and one replica may hold, and how
//! long finished games stay in the live store. Flags with environment variables, validated at start.

use std::time::Duration;

use draughts_runtime::ConfigError;
use draughts_store::StreamCaps;

/// Bounds of live games, watchers and the Redis state they leave (see `docs/operations.md`, "Bounded
/// resources").
#[derive(Clone, Debug, clap::Args)]
pub struct GamesLimits {
    /// Seconds each side has for its first move in Fischer games (clocks start once both sides have
    /// moved; a missed first move aborts the game).
    #[arg(long, env = "DRAUGHTS_FIRST_MOVE_SECS", default_value_t = 30)]
    pub first_move_secs: u64,
    /// How long a finished game's live record stays in the live store once it is archived, in
    /// seconds: late watchers still see the end there; afterwards GetGame, ExportPdn, WatchGame and
    /// ListGames read it from the database.
    #[arg(long, env = "DRAUGHTS_ARCHIVED_GAME_TTL_S", default_value_t = 3_600)]
    pub archived_game_ttl_s: u64,
    /// Ongoing games one player may have at once; starting another one is RESOURCE_EXHAUSTED.
    #[arg(long, env = "DRAUGHTS_MAX_OPEN_GAMES_PER_PLAYER", default_value_t = 50)]
    pub max_open_games_per_player: u32,
    /// Ongoing games a BOT may have at once (bots accept challenges unattended; the operator's bound
    /// on the server, under --max-open-games-per-player). Beyond: RESOURCE_EXHAUSTED.
    #[arg(long, env = "DRAUGHTS_MAX_OPEN_GAMES_PER_BOT", default_value_t = 8)]
    pub max_open_games_per_bot: u32,
    /// Pending invitations one player may hold from strangers (players they have no finished game
    /// with): a newer one is kept and the oldest from a stranger declined as "too many". Invitations
    /// from players they have played are not counted and never dropped so.
    #[arg(
        long,
        env = "DRAUGHTS_MAX_PENDING_FROM_STRANGERS",
        default_value_t = 20
    )]
    pub max_pending_from_strangers: u32,
    /// Games against the computer (`ai:<level>`) one guest may create per clock hour (UTC). Every
    /// creation counts, a game aborted at once included; past it CreateGame is RESOURCE_EXHAUSTED with
    /// `retry-after` (seconds to the next hour).
    #[arg(long, env = "DRAUGHTS_AI_GAMES_PER_HOUR_GUEST", default_value_t = 30)]
    pub ai_games_per_hour_guest: u32,
    /// Of those, games against levels 7-8 (the long searches) one guest may create per hour.
    #[arg(
        long,
        env = "DRAUGHTS_AI_STRONG_GAMES_PER_HOUR_GUEST",
        default_value_t = 6
    )]
    pub ai_strong_games_per_hour_guest: u32,
    /// Games against the computer one signed-in player (account, identity-provider player, API key
    /// without the admin scope) may create per hour.
    #[arg(long, env = "DRAUGHTS_AI_GAMES_PER_HOUR_PLAYER", default_value_t = 120)]
    pub ai_games_per_hour_player: u32,
    /// Games against the computer created from one client address per hour, whoever asks (the address
    /// as the rate limits count it: the trusted X-Forwarded-For entry, IPv6 by its /64), so that
    /// fresh guests from one host share one quota.
    #[arg(
        long,
        env = "DRAUGHTS_AI_GAMES_PER_HOUR_ADDRESS",
        default_value_t = 240
    )]
    pub ai_games_per_hour_address: u32,
    /// Open WatchGame streams per caller on one replica: per player or API key, per client IP
    /// address for anonymous watchers. More are RESOURCE_EXHAUSTED.
    #[arg(long, env = "DRAUGHTS_MAX_WATCHERS_PER_CALLER", default_value_t = 32)]
    pub max_watchers_per_caller: u32,
    /// Open WatchGame streams on one replica. More are RESOURCE_EXHAUSTED.
    #[arg(long, env = "DRAUGHTS_MAX_WATCHERS", default_value_t = 20_000)]
    pub max_watchers: u32,
    /// `games.finished` keeps at most this many entries, even if a consumer group has not read
    /// them (a group that stopped reading must not grow Redis without bound).
    #[arg(
        long,
        env = "DRAUGHTS_FINISHED_STREAM_MAX_LEN",
        default_value_t = 100_000
    )]
    pub finished_stream_max_len: u64,
    /// `games.finished` entries older than this are removed even if unread, in hours (the
    /// database keeps every finished game; consumers reconcile from it).
    #[arg(
        long,
        env = "DRAUGHTS_FINISHED_STREAM_MAX_AGE_H",
        default_value_t = 168
    )]
    pub finished_stream_max_age_h: u64,
}

impl GamesLimits {
    /// The defaults (the same as the flags').
    pub fn defaults() -> GamesLimits {
        GamesLimits {
            first_move_secs: super::record::DEFAULT_FIRST_MOVE_MS / 1000,
            archived_game_ttl_s: 3_600,
            max_open_games_per_player: 50,
            max_open_games_per_bot: 8,
            max_pending_from_strangers: 20,
            ai_games_per_hour_guest: 30,
            ai_strong_games_per_hour_guest: 6,
            ai_games_per_hour_player: 120,
            ai_games_per_hour_address: 240,
            max_watchers_per_caller: 32,
            max_watchers: 20_000,
            finished_stream_max_len: 100_000,
            finished_stream_max_age_h: 168,
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let in_range = |name: &str, value: u64, low: u64, high: u64| {
            if (low..=high).contains(&value) {
                Ok(())
            } else {
                Err(ConfigError(format!(
                    "{name} must be from {low} to {high}, got {value}"
                )))
            }
        };
        in_range("first-move-secs", self.first_move_secs, 1, 3_600)?;
        in_range(
            "archived-game-ttl-s",
            self.archived_game_ttl_s,
            1,
            30 * 86_400,
        )?;
        in_range(
            "max-open-games-per-player",
            self.max_open_games_per_player.into(),
            1,
            10_000,
        )?;
        in_range(
            "max-open-games-per-bot",
            self.max_open_games_per_bot.into(),
            1,
            10_000,
        )?;
        in_range(
            "max-pending-from-strangers",
            self.max_pending_from_strangers.into(),
            1,
            200,
        )?;
        for (name, value) in [
            ("ai-games-per-hour-guest", self.ai_games_per_hour_guest),
            (
                "ai-strong-games-per-hour-guest",
                self.ai_strong_games_per_hour_guest,
            ),
            ("ai-games-per-hour-player", self.ai_games_per_hour_player),
            ("ai-games-per-hour-address", self.ai_games_per_hour_address),
        ] {
            in_range(name, value.into(), 1, 1_000_000)?;
        }
        in_range(
            "max-watchers-per-caller",
            self.max_watchers_per_caller.into(),
            1,
            1_000_000,
        )?;
        in_range("max-watchers", self.max_watchers.into(), 1, 10_000_000)?;
        in_range(
            "finished-stream-max-len",
            self.finished_stream_max_len,
            100,
            100_000_000,
        )?;
        in_range(
            "finished-stream-max-age-h",
            self.finished_stream_max_age_h,
            1,
            24 * 365,
        )?;
        Ok(())
    }

    pub fn archived_game_ttl(&self) -> Duration {
        Duration::from_secs(self.archived_game_ttl_s)
    }

    /// The caps of `games.finished` for `LiveStore::trim_consumed`.
    pub fn finished_stream_caps(&self) -> StreamCaps {
        StreamCaps {
            max_len: self.finished_stream_max_len,
            max_age: Duration::from_secs(self.finished_stream_max_age_h * 3_600),
        }
    }
}
