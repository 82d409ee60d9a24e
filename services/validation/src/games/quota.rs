//! Quotas on games against the computer: a computer game costs the platform searches (a level 7-8
//! move thinks for seconds) and, when Games runs apart, a BestMove under Games' one key, so a caller
//! who creates and aborts them in a loop must be slowed, not the platform.
//!
//! Counted per clock hour (UTC) with the live store's rate counters, one key per hour
//! (`ai-games:<who>:<hour>`, expiring after the hour): per guest (levels 7-8 apart, with a smaller
//! quota), per signed-in player, per client address. Every creation counts, a refused one too, and
//! nothing is given back when a game is aborted (a game aborted before its second move counts as
//! created), so the create-abort loop spends the quota as fast as playing would. Past a quota
//! CreateGame is RESOURCE_EXHAUSTED with `retry-after` (seconds to the next hour). Callers with the
//! admin scope (services, tournaments) are not counted. Settings: [`super::GamesLimits`].

use std::time::Duration;

use super::service::{GamesCore, GamesError, GamesResult};

const HOUR_MS: u64 = 3_600_000;
/// Levels from which a guest's game counts against the strong quota too.
pub const STRONG_LEVEL: u8 = 7;

impl GamesCore {
    /// Counts one new game of `player` (a guest or not, from client `address`) against the computer
    /// at `level`; refuses it when a quota is spent.
    pub async fn count_computer_game(
        &self,
        player: &str,
        guest: bool,
        address: &str,
        level: u8,
    ) -> GamesResult<()> {
        let limits = self.limits();
        let now = self.now();
        let hour = now / HOUR_MS;
        let retry_after_secs = ((hour + 1) * HOUR_MS - now).div_ceil(1000).max(1);
        let mut checks: Vec<(String, u32, &str)> = Vec::new();
        if guest && level >= STRONG_LEVEL {
            checks.push((
                format!("ai-games:strong:{player}:{hour}"),
                limits.ai_strong_games_per_hour_guest,
                "games against the computer at levels 7-8 this hour (guests; sign up for more)",
            ));
        }
        checks.push(if guest {
            (
                format!("ai-games:{player}:{hour}"),
                limits.ai_games_per_hour_guest,
                "games against the computer this hour (guests; sign up for more)",
            )
        } else {
            (
                format!("ai-games:{player}:{hour}"),
                limits.ai_games_per_hour_player,
                "games against the computer this hour",
            )
        });
        checks.push((
            format!("ai-games:{address}:{hour}"),
            limits.ai_games_per_hour_address,
            "games against the computer from your address this hour",
        ));
        for (key, quota, what) in checks {
            // The window outlives the hour a little, so that the key of an hour is never counted
            // again after it expired within that hour.
            let count = self
                .live()
                .hit(&key, Duration::from_millis(HOUR_MS + 60_000))
                .await?;
            if count > u64::from(quota) {
                metrics::counter!("draughts_computer_games_refused_total").increment(1);
                return Err(GamesError::Quota {
                    what: format!("at most {quota} {what}"),
                    retry_after_secs,
                });
            }
        }
        Ok(())
    }
}
