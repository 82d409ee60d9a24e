//! Who may ask for what, and how much: tiers, per-request caps and quotas, counted in the live store so
//! every replica shares them.
//!
//! | tier | who | may call | caps |
//! |---|---|---|---|
//! | guest | callers without the `analysis` scope (guests have only `play`) | BestMove at levels 1 to `guest_max_level` (default 6), or explicit limits up to depth 10, 1 000 000 nodes, 1 000 ms, multi-PV 1; QueueStatus | `best_moves_per_day_guest` BestMoves a day |
//! | analysis | players and API keys with the `analysis` scope | everything | the `max_*` settings; `jobs_per_day_*` analysis jobs and `best_moves_per_day_*` BestMoves a day; a player has one interactive job queued or running at a time (API keys are not limited so: they are services) |
//! | admin | the `admin` scope | everything | the `max_*` settings; no daily quotas |
//!
//! Daily quotas are fixed UTC days (`LiveStore::hit` on `analysis-quota:<what>:<player>:<day>`); a
//! refused call is RESOURCE_EXHAUSTED with `retry-after` = the seconds to the next UTC midnight. Caps are
//! never lowered silently: a request over a cap is INVALID_ARGUMENT naming the field and the maximum.

use std::sync::Arc;
use std::time::Duration;

use draughts_auth::{Principal, PrincipalKind, Scope};
use draughts_runtime::ConfigError;
use draughts_runtime::admission::{Admission, Permit, Refused};
use draughts_store::{LiveStore, StoreError, now_unix_ms};

use crate::contract::{Class, JobLimits};
use crate::error::{AnalysisError, AnalysisResult};
use crate::queue::Queue;

/// Quotas and caps: flags with environment fallbacks.
#[derive(Clone, Debug, clap::Args)]
pub struct QuotaConfig {
    /// Analysis jobs (AnalyzePosition, AnalyzeGame) a player may queue per UTC day.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_JOBS_PER_DAY_PLAYER",
        default_value_t = 200
    )]
    pub jobs_per_day_player: u64,
    /// Analysis jobs an API key may queue per UTC day.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_JOBS_PER_DAY_API_KEY",
        default_value_t = 20_000
    )]
    pub jobs_per_day_api_key: u64,
    /// BestMove calls per UTC day for a caller without the analysis scope (guests).
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_BEST_MOVES_PER_DAY_GUEST",
        default_value_t = 2_000
    )]
    pub best_moves_per_day_guest: u64,
    /// BestMove calls per UTC day for a player.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_BEST_MOVES_PER_DAY_PLAYER",
        default_value_t = 10_000
    )]
    pub best_moves_per_day_player: u64,
    /// BestMove calls per UTC day for an API key.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_BEST_MOVES_PER_DAY_API_KEY",
        default_value_t = 1_000_000
    )]
    pub best_moves_per_day_api_key: u64,
    /// Highest level a guest may ask BestMove for (1-8).
    #[arg(long, env = "DRAUGHTS_ANALYSIS_GUEST_MAX_LEVEL", default_value_t = 6)]
    pub guest_max_level: u8,
    /// BestMove calls one guest may have in flight on a replica (more: RESOURCE_EXHAUSTED).
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_GUEST_BEST_MOVES_IN_FLIGHT",
        default_value_t = 2
    )]
    pub guest_best_moves_in_flight: u32,
    /// Guests' BestMove calls one client address (IPv6: its /64) may have in flight on a replica.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_GUEST_BEST_MOVES_IN_FLIGHT_PER_ADDRESS",
        default_value_t = 4
    )]
    pub guest_best_moves_in_flight_per_address: u32,
    /// Guests' BestMove calls in flight on a replica, all guests together.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_GUEST_BEST_MOVES_IN_FLIGHT_TOTAL",
        default_value_t = 32
    )]
    pub guest_best_moves_in_flight_total: u32,
    /// Largest depth a request may ask for (1-100).
    #[arg(long, env = "DRAUGHTS_ANALYSIS_MAX_DEPTH", default_value_t = 40)]
    pub max_depth: u32,
    /// Largest node count a request may ask for.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_MAX_NODES",
        default_value_t = 100_000_000
    )]
    pub max_nodes: u64,
    /// Largest movetime of a position search, milliseconds; also the time cap of a search that gives
    /// none.
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_MAX_MOVETIME_MS",
        default_value_t = 60_000
    )]
    pub max_movetime_ms: u64,
    /// Largest movetime per ply of a game analysis, milliseconds (and its cap when none is given).
    #[arg(
        long,
        env = "DRAUGHTS_ANALYSIS_MAX_PLY_MOVETIME_MS",
        default_value_t = 10_000
    )]
    pub max_ply_movetime_ms: u64,
}

impl QuotaConfig {
    /// The defaults (also what tests start from).
    pub fn defaults() -> QuotaConfig {
        QuotaConfig {
            jobs_per_day_player: 200,
            jobs_per_day_api_key: 20_000,
            best_moves_per_day_guest: 2_000,
            best_moves_per_day_player: 10_000,
            best_moves_per_day_api_key: 1_000_000,
            guest_max_level: 6,
            guest_best_moves_in_flight: 2,
            guest_best_moves_in_flight_per_address: 4,
            guest_best_moves_in_flight_total: 32,
            max_depth: 40,
            max_nodes: 100_000_000,
            max_movetime_ms: 60_000,
            max_ply_movetime_ms: 10_000,
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=8).contains(&self.guest_max_level) {
            return Err(ConfigError(format!(
                "analysis-guest-max-level must be from 1 to 8, got {}",
                self.guest_max_level
            )));
        }
        let in_flight = [
            self.guest_best_moves_in_flight,
            self.guest_best_moves_in_flight_per_address,
            self.guest_best_moves_in_flight_total,
        ];
        if !in_flight.iter().all(|n| (1..=100_000).contains(n)) {
            return Err(ConfigError(format!(
                "analysis-guest-best-moves-in-flight, -per-address and -total must be from 1 to 100000, got {in_flight:?}"
            )));
        }
        if !(1..=100).contains(&self.max_depth) {
            return Err(ConfigError(format!(
                "analysis-max-depth must be from 1 to 100, got {}",
                self.max_depth
            )));
        }
        if !(1..=600_000).contains(&self.max_movetime_ms)
            || !(1..=600_000).contains(&self.max_ply_movetime_ms)
        {
            return Err(ConfigError(
                "analysis-max-movetime-ms and analysis-max-ply-movetime-ms must be from 1 to 600000"
                    .into(),
            ));
        }
        if self.max_nodes == 0 {
            return Err(ConfigError("analysis-max-nodes must be at least 1".into()));
        }
        Ok(())
    }
}

/// What a caller may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    Guest,
    Analysis,
    Admin,
}

/// An authenticated caller as the analysis service sees it.
#[derive(Clone, Debug)]
pub struct Caller {
    pub player_id: String,
    pub kind: PrincipalKind,
    pub tier: Tier,
    /// The caller's `authorization` metadata, passed on to Games.
    pub authorization: Option<String>,
    /// The client address as the rate limits count it (`addr:...`; `addr:unknown` without one).
    pub address: String,
}

impl Caller {
    pub fn new(principal: &Principal, authorization: Option<String>, address: String) -> Caller {
        let tier = if principal.scopes.has(Scope::Admin) {
            Tier::Admin
        } else if principal.scopes.has(Scope::Analysis) {
            Tier::Analysis
        } else {
            Tier::Guest
        };
        Caller {
            player_id: principal.player_id.clone(),
            kind: principal.kind,
            tier,
            authorization,
            address,
        }
    }

    /// The queue class of this caller's BestMove: services' keys (the computer players of live games,
    /// with the analysis or admin scope) and admins first; players with the analysis scope with the
    /// interactive work; guests in their own class, after both.
    pub fn best_move_class(&self) -> Class {
        match (self.tier, self.kind) {
            (Tier::Admin, _) | (Tier::Analysis, PrincipalKind::ApiKey) => Class::ComputerMove,
            (Tier::Analysis, _) => Class::Interactive,
            (Tier::Guest, _) => Class::Guest,
        }
    }

    /// PERMISSION_DENIED unless the caller has the analysis scope.
    pub fn require_analysis(&self) -> AnalysisResult<()> {
        match self.tier {
            Tier::Guest => Err(AnalysisError::Denied(
                "this call needs the analysis scope (guests may only ask BestMove)".into(),
            )),
            _ => Ok(()),
        }
    }
}

/// Guests' BestMove calls in flight on this replica: per guest, per client address, and in all
/// (`guest_best_moves_in_flight*`). A call holds its [`GuestPermit`] until it is answered.
#[derive(Clone, Debug)]
pub struct GuestLimits {
    calls: Arc<Admission>,
    addresses: Arc<Admission>,
}

/// A guest's BestMove call admitted; dropping it frees its places.
#[derive(Debug)]
pub struct GuestPermit {
    _call: Permit,
    _address: Permit,
}

impl GuestLimits {
    pub fn new(config: &QuotaConfig) -> GuestLimits {
        GuestLimits {
            calls: Admission::new(
                config.guest_best_moves_in_flight,
                config.guest_best_moves_in_flight_total,
                Some("analysis_guest_best_moves_in_flight"),
            ),
            addresses: Admission::new(
                config.guest_best_moves_in_flight_per_address,
                u32::MAX,
                None,
            ),
        }
    }

    /// Admits one more BestMove call of `caller` (a guest), or RESOURCE_EXHAUSTED naming the bound.
    pub fn admit(&self, caller: &Caller) -> AnalysisResult<GuestPermit> {
        let refused = |what: String| AnalysisError::Exhausted {
            what,
            retry_after_secs: 1,
        };
        let call = self.calls.admit(&caller.player_id).map_err(|r| match r {
            Refused::PerKey { open } => refused(format!(
                "you have {open} BestMove calls in flight, a guest's limit; wait for an answer"
            )),
            Refused::Total { open } => refused(format!(
                "guests have {open} BestMove calls in flight on this server, its limit"
            )),
        })?;
        let address = self.addresses.admit(&caller.address).map_err(|r| {
            let open = match r {
                Refused::PerKey { open } | Refused::Total { open } => open,
            };
            refused(format!(
                "your address has {open} guests' BestMove calls in flight, its limit"
            ))
        })?;
        Ok(GuestPermit {
            _call: call,
            _address: address,
        })
    }
}

/// The largest limits of one search, by what the search is for.
#[derive(Clone, Copy, Debug)]
pub struct Caps {
    pub depth: u32,
    pub nodes: u64,
    pub movetime_ms: u64,
    pub multi_pv: u32,
}

/// Which daily counter.
#[derive(Clone, Copy, Debug)]
pub enum Counter {
    Jobs,
    BestMoves,
}

/// The rules of [`QuotaConfig`] over the live store.
#[derive(Clone, Debug)]
pub struct Quotas {
    live: Arc<dyn LiveStore>,
    config: QuotaConfig,
}

const DAY_MS: u64 = 86_400_000;

impl Quotas {
    pub fn new(live: Arc<dyn LiveStore>, config: QuotaConfig) -> Quotas {
        Quotas { live, config }
    }

    pub fn config(&self) -> &QuotaConfig {
        &self.config
    }

    /// The caps of a position search (`per_ply`: of each ply of a game analysis).
    pub fn caps(&self, caller: &Caller, per_ply: bool) -> Caps {
        match caller.tier {
            Tier::Guest => Caps {
                depth: 10,
                nodes: 1_000_000,
                movetime_ms: 1_000,
                multi_pv: 1,
            },
            Tier::Analysis | Tier::Admin => Caps {
                depth: self.config.max_depth,
                nodes: self.config.max_nodes,
                movetime_ms: if per_ply {
                    self.config.max_ply_movetime_ms
                } else {
                    self.config.max_movetime_ms
                },
                multi_pv: 10,
            },
        }
    }

    /// Checks requested limits against `caps` and returns the job's limits (movetime set to the cap
    /// when not given, so every search has a time bound).
    pub fn limits(
        &self,
        depth: u32,
        nodes: u64,
        movetime_ms: u64,
        multi_pv: u32,
        caps: Caps,
    ) -> AnalysisResult<JobLimits> {
        if depth == 0 && nodes == 0 && movetime_ms == 0 {
            return Err(AnalysisError::Invalid(
                "limits: set at least one of depth, nodes and movetime_ms".into(),
            ));
        }
        let over = |field: &str, max: u64| {
            AnalysisError::Invalid(format!(
                "limits.{field} may be at most {max} for this caller"
            ))
        };
        if depth > caps.depth.min(100) {
            return Err(over("depth", u64::from(caps.depth.min(100))));
        }
        if nodes > caps.nodes.min(1_000_000_000) {
            return Err(over("nodes", caps.nodes.min(1_000_000_000)));
        }
        if movetime_ms > caps.movetime_ms.min(600_000) {
            return Err(over("movetime_ms", caps.movetime_ms.min(600_000)));
        }
        if multi_pv > caps.multi_pv.min(10) {
            return Err(over("multi_pv", u64::from(caps.multi_pv.min(10))));
        }
        Ok(JobLimits {
            depth: (depth > 0).then_some(depth),
            nodes: (nodes > 0).then_some(nodes),
            movetime_ms: Some(if movetime_ms > 0 {
                movetime_ms
            } else {
                caps.movetime_ms
            }),
            multi_pv: multi_pv.max(1),
        })
    }

    /// The highest BestMove level the caller may ask for.
    pub fn max_level(&self, caller: &Caller) -> u8 {
        match caller.tier {
            Tier::Guest => self.config.guest_max_level,
            _ => 8,
        }
    }

    /// Counts one call against the caller's daily quota.
    pub async fn count(&self, caller: &Caller, counter: Counter) -> AnalysisResult<()> {
        let limit = match (caller.tier, counter, caller.kind) {
            (Tier::Admin, _, _) => return Ok(()),
            (Tier::Guest, Counter::BestMoves, _) => self.config.best_moves_per_day_guest,
            (_, Counter::BestMoves, PrincipalKind::ApiKey) => {
                self.config.best_moves_per_day_api_key
            }
            (_, Counter::BestMoves, _) => self.config.best_moves_per_day_player,
            (_, Counter::Jobs, PrincipalKind::ApiKey) => self.config.jobs_per_day_api_key,
            (_, Counter::Jobs, _) => self.config.jobs_per_day_player,
        };
        let what = match counter {
            Counter::Jobs => "jobs",
            Counter::BestMoves => "best-moves",
        };
        let now = now_unix_ms();
        let day = now / DAY_MS;
        let key = format!("analysis-quota:{what}:{}:{day}", caller.player_id);
        let hits = self
            .live
            .hit(&key, Duration::from_millis(DAY_MS + 3_600_000))
            .await?;
        if hits > limit {
            let retry_after_secs = ((day + 1) * DAY_MS - now).div_ceil(1000).max(1);
            return Err(AnalysisError::Exhausted {
                what: format!("daily quota of {limit} {what} used up"),
                retry_after_secs,
            });
        }
        Ok(())
    }

    /// Reserves the caller's one interactive job (players and guests; API keys are not limited so):
    /// refused while the job the caller reserved before is queued or running.
    pub async fn reserve_active(
        &self,
        caller: &Caller,
        job_id: &str,
        queue: &Queue,
    ) -> AnalysisResult<()> {
        if caller.kind == PrincipalKind::ApiKey || caller.tier == Tier::Admin {
            return Ok(());
        }
        let key = format!("analysis-active:{}", caller.player_id);
        let busy = |holder: &str| AnalysisError::Exhausted {
            what: format!("one analysis at a time: job {holder} is still queued or running"),
            retry_after_secs: 2,
        };
        let expected = match self.live.get(&key).await? {
            Some((holder, version)) => {
                let holder = String::from_utf8_lossy(&holder).into_owned();
                if let Some((record, _)) = queue.load(&holder).await?
                    && !record.state.is_final()
                    && record.owners.iter().any(|o| *o == caller.player_id)
                {
                    return Err(busy(&holder));
                }
                Some(version)
            }
            None => None,
        };
        match self
            .live
            .put(
                &key,
                job_id.to_owned().into(),
                expected,
                Some(queue.config().result_ttl),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(StoreError::Conflict { .. }) => Err(busy("(another request)")),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use draughts_auth::Scopes;

    use super::*;

    fn caller(kind: PrincipalKind, scopes: Scopes) -> Caller {
        let principal = Principal {
            player_id: "x".into(),
            display_name: "x".into(),
            kind,
            scopes,
        };
        Caller::new(&principal, None, "addr:unknown".into())
    }

    #[test]
    fn best_moves_go_to_the_class_of_their_caller() {
        // Guests (play scope only): their own class, after players' work.
        assert_eq!(
            caller(PrincipalKind::Guest, Scopes::PLAY).best_move_class(),
            Class::Guest
        );
        // A player with the analysis scope: with the interactive work.
        assert_eq!(
            caller(PrincipalKind::Player, Scopes::ANALYSIS).best_move_class(),
            Class::Interactive
        );
        assert_eq!(
            caller(PrincipalKind::Account, Scopes::ANALYSIS).best_move_class(),
            Class::Interactive
        );
        // A service's key (Games' computer players) and admins: the computer-move class.
        assert_eq!(
            caller(PrincipalKind::ApiKey, Scopes::ANALYSIS).best_move_class(),
            Class::ComputerMove
        );
        assert_eq!(
            caller(PrincipalKind::ApiKey, Scopes::ALL).best_move_class(),
            Class::ComputerMove
        );
        // An API key without the analysis scope is a guest tier caller.
        assert_eq!(
            caller(PrincipalKind::ApiKey, Scopes::PLAY).best_move_class(),
            Class::Guest
        );
    }
}
