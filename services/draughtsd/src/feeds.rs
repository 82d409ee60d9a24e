//! What one service of the one-process platform learns from another, in process: the ratings
//! reconciler reads the finished games the games service publishes ([`GamesCore::finished_since`],
//! the function behind `Games.ListFinishedGames`), never the games service's tables.

use draughts_ratings::RatingsError;
use draughts_ratings::error::RatingsResult;
use draughts_ratings::games_feed::{FeedEntry, FeedQuery, FinishedFeed};
use draughts_validation::games::GamesCore;
use draughts_validation::games::published::FinishedQuery;

/// The games service of this process, as the ratings reconciler's feed.
#[derive(Clone, Debug)]
pub struct GamesFinishedFeed {
    pub games: GamesCore,
}

#[tonic::async_trait]
impl FinishedFeed for GamesFinishedFeed {
    async fn page(&self, query: &FeedQuery) -> RatingsResult<Vec<FeedEntry>> {
        let entries = self
            .games
            .finished_since(&FinishedQuery {
                after_ms: query.after_ms,
                after_game_id: query.after_game_id.clone(),
                before_ms: Some(query.before_ms),
                limit: query.limit,
                rated_only: query.rated_only,
            })
            .await
            .map_err(|e| RatingsError::Upstream(format!("finished games: {e}")))?;
        Ok(entries
            .into_iter()
            .map(|e| FeedEntry {
                game_id: e.game_id,
                finished_at_ms: e.finished_at_ms,
                event: e.event,
            })
            .collect())
    }
}
