//! Settings of the rating system and of the consumer: flags with environment fallbacks, validated at start.

use std::time::Duration;

use draughts_engine::Variant;
use draughts_runtime::ConfigError;

use crate::glicko::Params;

/// How results are grouped into Glicko-2 rating periods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PeriodMode {
    /// Each game is its own rating period, rated when it arrives; the deviation first grows with the
    /// time since the player's previous game (as the big online platforms do).
    PerGame,
    /// Fixed periods of `--rating-period-secs`: every game of a period is rated together when the period
    /// ends (Glickman's original scheme).
    Fixed,
}

/// What to do with games of some kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Policy {
    /// Not rated (acknowledged and ignored).
    Skip,
    /// Rated like any other game.
    Rate,
}

/// What to do with games against the computer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ComputerPolicy {
    /// Not rated.
    Skip,
    /// Both sides rated; the computer's id (e.g. `ai:5`) has a rating like a player.
    Rate,
    /// Only the human is rated, against the computer's current rating; the computer's stays as it is.
    HumanOnly,
}

/// What to do with games between a BOT and a person (games between two bots are rated like any
/// other). Either way bots are on their own leaderboards (`LeaderboardRequest.bots`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BotPolicy {
    /// Both sides rated, as lichess does: bots and people in one rating pool, so their ratings
    /// compare, and apart on the leaderboards.
    Rate,
    /// Only the bot is rated, against the person's current rating; the person's rating stays.
    BotOnly,
    /// Not rated.
    Skip,
}

/// The rating system: Glicko-2 parameters, rating periods and which games count.
#[derive(Clone, Debug, clap::Args)]
pub struct RatingsConfig {
    /// Rating of a new player, rating points.
    #[arg(
        long,
        env = "DRAUGHTS_RATINGS_INITIAL_RATING",
        default_value_t = 1500.0
    )]
    pub initial_rating: f64,
    /// Rating deviation of a new player, rating points.
    #[arg(
        long,
        env = "DRAUGHTS_RATINGS_INITIAL_DEVIATION",
        default_value_t = 350.0
    )]
    pub initial_deviation: f64,
    /// Volatility (sigma) of a new player.
    #[arg(
        long,
        env = "DRAUGHTS_RATINGS_INITIAL_VOLATILITY",
        default_value_t = 0.06
    )]
    pub initial_volatility: f64,
    /// Glickman's tau: how fast volatility may change (0.3 to 1.2).
    #[arg(long, env = "DRAUGHTS_RATINGS_TAU", default_value_t = 0.75)]
    pub tau: f64,
    /// Smallest rating deviation, rating points.
    #[arg(long, env = "DRAUGHTS_RATINGS_MIN_DEVIATION", default_value_t = 45.0)]
    pub min_deviation: f64,
    /// Largest rating deviation (also the cap of growth with inactivity), rating points.
    #[arg(long, env = "DRAUGHTS_RATINGS_MAX_DEVIATION", default_value_t = 350.0)]
    pub max_deviation: f64,
    /// Largest volatility.
    #[arg(long, env = "DRAUGHTS_RATINGS_MAX_VOLATILITY", default_value_t = 0.1)]
    pub max_volatility: f64,
    /// A rating whose deviation is above this is provisional and left out of leaderboards.
    #[arg(
        long,
        env = "DRAUGHTS_RATINGS_PROVISIONAL_DEVIATION",
        default_value_t = 110.0
    )]
    pub provisional_deviation: f64,
    /// Rating periods: `per-game` or `fixed`.
    #[arg(long, env = "DRAUGHTS_RATINGS_PERIODS", value_enum, default_value_t = PeriodMode::PerGame)]
    pub periods: PeriodMode,
    /// Length of a rating period in seconds: how often fixed periods are rated, and the unit in which
    /// inactivity grows deviations (default 112 h: lichess's 0.21436 rating periods per day).
    #[arg(long, env = "DRAUGHTS_RATINGS_PERIOD_SECS", default_value_t = 403_200)]
    pub period_secs: u64,
    /// Fixed periods: how long after a period ends results may still arrive for it before it is rated,
    /// seconds (later results go into the next period).
    #[arg(
        long,
        env = "DRAUGHTS_RATINGS_PERIOD_GRACE_SECS",
        default_value_t = 600
    )]
    pub period_grace_secs: u64,
    /// Variants rated per speed class (bullet, blitz, rapid, classical, correspondence) when the time
    /// control is known; comma-separated variant keys, or `none`.
    #[arg(
        long,
        env = "DRAUGHTS_RATINGS_SPEED_CLASS_VARIANTS",
        default_value = "international"
    )]
    pub speed_class_variants: String,
    /// Casual (unrated) games: `skip` or `rate`.
    #[arg(long, env = "DRAUGHTS_RATINGS_CASUAL_GAMES", value_enum, default_value_t = Policy::Skip)]
    pub casual_games: Policy,
    /// Games against the computer: `skip`, `rate` (both sides) or `human-only`.
    #[arg(long, env = "DRAUGHTS_RATINGS_COMPUTER_GAMES", value_enum, default_value_t = ComputerPolicy::Skip)]
    pub computer_games: ComputerPolicy,
    /// Games with a guest player: `skip` (default: a guest costs nothing to make, so its rating could be
    /// farmed with guests of one's own; ratings are for signed-in accounts) or `rate`.
    #[arg(long, env = "DRAUGHTS_RATINGS_GUEST_GAMES", value_enum, default_value_t = Policy::Skip)]
    pub guest_games: Policy,
    /// Games between a BOT and a person: `rate` (both sides, as lichess: one rating pool, bots on
    /// their own leaderboards), `bot-only` (the person's rating stays) or `skip`.
    #[arg(long, env = "DRAUGHTS_RATINGS_BOT_GAMES", value_enum, default_value_t = BotPolicy::Rate)]
    pub bot_games: BotPolicy,
    /// Games played with house-rule options (no-mandatory-capture, move-limit, ...): `skip` or `rate`.
    #[arg(long, env = "DRAUGHTS_RATINGS_HOUSE_RULE_GAMES", value_enum, default_value_t = Policy::Skip)]
    pub house_rule_games: Policy,
    /// Rated games between the same two players in one rating category that may change their ratings
    /// within any 24 hours; later ones are recorded but change nothing (0: no limit). This bounds how far
    /// two consenting accounts can move each other's ratings by trading wins.
    #[arg(
        long,
        env = "DRAUGHTS_RATINGS_PAIR_GAMES_PER_DAY",
        default_value_t = 10
    )]
    pub pair_games_per_day: u32,
    /// Consumer group on the finished-games stream (replicas share it; each entry goes to one of them).
    #[arg(long, env = "DRAUGHTS_RATINGS_GROUP", default_value = "ratings")]
    pub consumer_group: String,
    /// This consumer's name in the group; empty = `ratings-<host>-<random>`.
    #[arg(long, env = "DRAUGHTS_RATINGS_CONSUMER", default_value = "")]
    pub consumer_name: String,
    /// Most stream entries applied in one database transaction.
    #[arg(long, env = "DRAUGHTS_RATINGS_BATCH_SIZE", default_value_t = 256)]
    pub batch_size: usize,
    /// How long one read waits for new entries, milliseconds.
    #[arg(long, env = "DRAUGHTS_RATINGS_BLOCK_MS", default_value_t = 1000)]
    pub block_ms: u64,
    /// Entries pending this long with another consumer (which crashed or hangs) are taken over,
    /// milliseconds.
    #[arg(long, env = "DRAUGHTS_RATINGS_CLAIM_IDLE_MS", default_value_t = 30_000)]
    pub claim_idle_ms: u64,
    /// How often to look for such entries, milliseconds.
    #[arg(
        long,
        env = "DRAUGHTS_RATINGS_CLAIM_INTERVAL_MS",
        default_value_t = 5_000
    )]
    pub claim_interval_ms: u64,
    /// How often the reconciler sweeps the finished games the games service lists
    /// (`Games.ListFinishedGames`) for those the stream did not deliver, milliseconds; 0 turns it off
    /// (then a lost stream entry is never rated). The separate service needs `--ratings-games-url` and
    /// `--ratings-api-key` for it.
    #[arg(
        long,
        env = "DRAUGHTS_RATINGS_RECONCILE_INTERVAL_MS",
        default_value_t = 60_000
    )]
    pub reconcile_interval_ms: u64,
    /// Games that finished less than this long ago are left to the stream, milliseconds.
    #[arg(
        long,
        env = "DRAUGHTS_RATINGS_RECONCILE_DELAY_MS",
        default_value_t = 60_000
    )]
    pub reconcile_delay_ms: u64,
    /// Each sweep starts this long before the previous sweep's end, milliseconds, so that games archived
    /// late (after their finish time) are still found.
    #[arg(
        long,
        env = "DRAUGHTS_RATINGS_RECONCILE_MARGIN_MS",
        default_value_t = 3_600_000
    )]
    pub reconcile_margin_ms: u64,
}

impl RatingsConfig {
    /// The defaults, as `--help` shows them (for tests and embedding).
    pub fn defaults() -> RatingsConfig {
        RatingsConfig {
            initial_rating: 1500.0,
            initial_deviation: 350.0,
            initial_volatility: 0.06,
            tau: 0.75,
            min_deviation: 45.0,
            max_deviation: 350.0,
            max_volatility: 0.1,
            provisional_deviation: 110.0,
            periods: PeriodMode::PerGame,
            period_secs: 403_200,
            period_grace_secs: 600,
            speed_class_variants: "international".into(),
            casual_games: Policy::Skip,
            computer_games: ComputerPolicy::Skip,
            bot_games: BotPolicy::Rate,
            guest_games: Policy::Skip,
            house_rule_games: Policy::Skip,
            pair_games_per_day: 10,
            consumer_group: "ratings".into(),
            consumer_name: String::new(),
            batch_size: 256,
            block_ms: 1000,
            claim_idle_ms: 30_000,
            claim_interval_ms: 5_000,
            reconcile_interval_ms: 60_000,
            reconcile_delay_ms: 60_000,
            reconcile_margin_ms: 3_600_000,
        }
    }

    /// The Glicko-2 parameters.
    pub fn params(&self) -> Params {
        Params {
            initial_rating: self.initial_rating,
            initial_deviation: self.initial_deviation,
            initial_volatility: self.initial_volatility,
            tau: self.tau,
            min_deviation: self.min_deviation,
            max_deviation: self.max_deviation,
            max_volatility: self.max_volatility,
        }
    }

    /// The variants rated per speed class.
    pub fn speed_class_variants(&self) -> Result<Vec<Variant>, ConfigError> {
        let text = self.speed_class_variants.trim();
        if text.is_empty() || text == "none" {
            return Ok(Vec::new());
        }
        text.split(',')
            .map(|key| {
                let key = key.trim();
                Variant::from_key(key).map_err(|_| {
                        ConfigError(format!(
                            "speed-class-variants: unknown variant '{key}' (expected keys such as international, english)"
                        ))
                    })
            })
            .collect()
    }

    /// A rating period.
    pub fn period(&self) -> Duration {
        Duration::from_secs(self.period_secs)
    }

    /// Fails fast on values that cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.params()
            .check()
            .map_err(|e| ConfigError(format!("ratings: {e}")))?;
        if !(self.provisional_deviation.is_finite()
            && self.provisional_deviation > self.min_deviation
            && self.provisional_deviation <= self.max_deviation)
        {
            return Err(ConfigError(format!(
                "provisional-deviation must be above min-deviation ({}) and at most max-deviation ({}), got {}",
                self.min_deviation, self.max_deviation, self.provisional_deviation
            )));
        }
        if !(1..=10 * 365 * 24 * 3600).contains(&self.period_secs) {
            return Err(ConfigError(format!(
                "period-secs must be from 1 to 315360000 (ten years), got {}",
                self.period_secs
            )));
        }
        if self.period_grace_secs > self.period_secs.saturating_mul(10) {
            return Err(ConfigError(format!(
                "period-grace-secs must be at most ten periods, got {}",
                self.period_grace_secs
            )));
        }
        self.speed_class_variants()?;
        if self.pair_games_per_day > 10_000 {
            return Err(ConfigError(format!(
                "pair-games-per-day must be at most 10000 (0: no limit), got {}",
                self.pair_games_per_day
            )));
        }
        if self.consumer_group.is_empty()
            || self.consumer_group.len() > 64
            || self.consumer_name.len() > 128
        {
            return Err(ConfigError(
                "consumer group must be 1 to 64 bytes and the consumer name at most 128".into(),
            ));
        }
        if !(1..=10_000).contains(&self.batch_size) {
            return Err(ConfigError(format!(
                "batch-size must be from 1 to 10000, got {}",
                self.batch_size
            )));
        }
        if !(1..=60_000).contains(&self.block_ms) {
            return Err(ConfigError(format!(
                "block-ms must be from 1 to 60000, got {}",
                self.block_ms
            )));
        }
        if self.claim_idle_ms < 10 || self.claim_interval_ms < 10 {
            return Err(ConfigError(
                "claim-idle-ms and claim-interval-ms must be at least 10".into(),
            ));
        }
        if self.reconcile_interval_ms != 0 && self.reconcile_interval_ms < 10 {
            return Err(ConfigError(format!(
                "reconcile-interval-ms must be 0 (off) or at least 10, got {}",
                self.reconcile_interval_ms
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_clap() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            ratings: RatingsConfig,
        }
        let parsed = Cli::parse_from(["ratings"]).ratings;
        let defaults = RatingsConfig::defaults();
        assert_eq!(format!("{parsed:?}"), format!("{defaults:?}"));
        defaults.validate().unwrap();
        assert_eq!(
            defaults.speed_class_variants().unwrap(),
            [Variant::International]
        );
    }

    #[test]
    fn bad_values_fail() {
        let mut c = RatingsConfig::defaults();
        c.provisional_deviation = 400.0;
        assert!(c.validate().is_err());
        let mut c = RatingsConfig::defaults();
        c.speed_class_variants = "international,chess".into();
        assert!(c.validate().is_err());
        let mut c = RatingsConfig::defaults();
        c.tau = -1.0;
        assert!(c.validate().is_err());
        let mut c = RatingsConfig::defaults();
        c.batch_size = 0;
        assert!(c.validate().is_err());
        let mut c = RatingsConfig::defaults();
        c.speed_class_variants = "none".into();
        assert_eq!(c.speed_class_variants().unwrap(), []);
    }
}
