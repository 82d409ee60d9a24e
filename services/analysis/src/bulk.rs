//! Bulk analysis of finished games, when the operator turns it on (`--analysis-bulk-finished-games`):
//! a consumer of the `games.finished` stream (consumer group `analysis-bulk`, typed by
//! `draughts_proto::contract::finished`) that queues an AnalyzeGame job in the bulk class for every
//! finished rated game, at `--analysis-bulk-nodes-per-ply` nodes per ply.
//!
//! The job is mergeable and carries the game id, so a redelivered entry joins (or is answered by the
//! cache of) the job already queued for that game, and a user's later AnalyzeGame of the same game id at
//! the same limits is answered from the cache at once. A full bulk queue is back-pressure: the entry is
//! kept and retried (not acknowledged) until there is room. Should the store lose its data (NOGROUP),
//! the group is created again and the feed goes on.

use std::time::Duration;

use draughts_engine::{RuleOptions, RuleSet};
use draughts_proto::contract::finished;

use crate::contract::{Class, JobLimits, JobSpec, Line};
use crate::engine;
use crate::error::AnalysisError;
use crate::pdn;
use crate::queue::{NewJob, Queue};

/// The consumer group on `games.finished`.
pub const GROUP: &str = "analysis-bulk";

/// The bulk job for a finished game, or why there is none (not rated, no PDN, unreadable PDN).
pub fn job_for(event: &finished::FinishedV1, limits: &JobLimits) -> Result<JobSpec, String> {
    if !event.rated {
        return Err("not rated".into());
    }
    if event.pdn.is_empty() {
        return Err("no PDN in the event".into());
    }
    let options = RuleOptions::parse(&event.options).map_err(|e| e.to_string())?;
    let rules = RuleSet::with_options(event.variant, options).map_err(|e| e.to_string())?;
    let game = pdn::parse(&event.pdn, Some(rules)).map_err(|e| e.to_string())?;
    if game.moves.is_empty() {
        return Err("no moves".into());
    }
    Ok(JobSpec::Game {
        line: Line {
            rules: engine::rules_to_contract(rules),
            fen: game.start_fen,
            moves: game.moves,
        },
        limits: limits.clone(),
        game_id: Some(event.game_id.to_string()),
    })
}

/// Consumes `games.finished` until `shutdown` resolves.
pub async fn run(
    queue: Queue,
    consumer: String,
    limits: JobLimits,
    shutdown: impl Future<Output = ()>,
) {
    let live = queue.live().clone();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut group_ready = false;
    loop {
        if !group_ready {
            if let Err(e) = live.ensure_group(finished::STREAM, GROUP).await {
                tracing::warn!(error = %e, "bulk analysis: cannot create the consumer group");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    _ = &mut shutdown => return,
                }
            }
            group_ready = true;
        }
        let read = tokio::select! {
            read = live.read_group(finished::STREAM, GROUP, &consumer, 16, Duration::from_millis(500)) => read,
            _ = &mut shutdown => return,
        };
        let entries = match read {
            Ok(entries) => entries,
            Err(e) if crate::queue::group_missing(&e) => {
                // The store lost its data (NOGROUP): the group is created again, from the start of
                // whatever the stream holds now.
                tracing::warn!(error = %e, "bulk analysis: consumer group missing; creating it again");
                group_ready = false;
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "bulk analysis: reading games.finished failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for entry in entries {
            match finished::decode(&entry.payload) {
                Ok(event) => match job_for(&event, &limits) {
                    Ok(spec) => loop {
                        let submitted = queue
                            .submit(NewJob {
                                job_id: Queue::new_job_id(),
                                class: Class::Bulk,
                                spec: spec.clone(),
                                owner: None,
                                mergeable: true,
                                trace: Default::default(),
                            })
                            .await;
                        match submitted {
                            Ok(_) => break,
                            Err(AnalysisError::Exhausted { .. }) => {
                                tokio::select! {
                                    _ = tokio::time::sleep(Duration::from_secs(5)) => {}
                                    _ = &mut shutdown => return,
                                }
                            }
                            Err(e) => {
                                tracing::warn!(error = %e, game_id = %event.game_id, "bulk analysis: queueing failed; retrying");
                                tokio::select! {
                                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                                    _ = &mut shutdown => return,
                                }
                            }
                        }
                    },
                    Err(why) => {
                        tracing::debug!(game_id = %event.game_id, why, "bulk analysis: game skipped")
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, id = %entry.id, "bulk analysis: unreadable games.finished entry skipped")
                }
            }
            if let Err(e) = live.ack(finished::STREAM, GROUP, &[entry.id]).await {
                tracing::warn!(error = %e, "bulk analysis: ack failed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(rated: bool, pdn: &str) -> finished::FinishedV1 {
        let text = format!(
            r#"{{"v":1,"game_id":"g_1","variant":"international","options":"","rated":{rated},
             "white":{{"id":"player:1"}},"black":{{"id":"player:2"}},"outcome":"white","reason":"resignation",
             "plies":2,"finished_at_ms":1,"pdn":{}}}"#,
            serde_json::to_string(pdn).unwrap()
        );
        finished::decode(text.as_bytes()).unwrap()
    }

    #[test]
    fn rated_games_with_pdn_become_bulk_game_jobs() {
        let limits = JobLimits {
            nodes: Some(1000),
            movetime_ms: Some(10_000),
            multi_pv: 1,
            ..JobLimits::default()
        };
        let pdn = "[Event \"x\"]\n[GameType \"20\"]\n1. 32-28 19-23 2-0";
        let JobSpec::Game { line, game_id, .. } = job_for(&event(true, pdn), &limits).unwrap()
        else {
            panic!("a game job");
        };
        assert_eq!(line.moves, ["32-28", "19-23"]);
        assert_eq!(game_id.as_deref(), Some("g_1"));
        assert_eq!(
            job_for(&event(false, pdn), &limits).unwrap_err(),
            "not rated"
        );
        assert!(job_for(&event(true, ""), &limits).is_err());
        assert!(job_for(&event(true, "1. 32-28 32-28"), &limits).is_err());
    }
}
