//! Where the reconciler learns of finished games: from what the games service publishes, never from
//! its storage. [`FinishedFeed`] is that port; [`GrpcFinishedFeed`] calls `Games.ListFinishedGames` with
//! the platform's service credential (`--ratings-games-url`, `--ratings-api-key`: an API key with the
//! `service` scope); the one-process platform gives the games service's own function instead.

use std::fmt;

use draughts_auth::layer::ServiceKey;
use draughts_proto::pb;
use draughts_runtime::upstream;
use tonic::transport::Channel;

use crate::error::{RatingsError, RatingsResult};

/// One finished game as the `games.finished` stream carried it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeedEntry {
    pub game_id: String,
    /// Unix epoch milliseconds.
    pub finished_at_ms: u64,
    /// The `games.finished` payload (`draughts_proto::contract::finished`).
    pub event: Vec<u8>,
}

/// A page of finished games to ask for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeedQuery {
    /// Games that finished after (`after_ms`, `after_game_id`), by finish time then game id.
    pub after_ms: u64,
    pub after_game_id: String,
    /// Only games that finished before this, Unix ms.
    pub before_ms: u64,
    /// At most this many (the games service answers at most 500).
    pub limit: usize,
    /// Only games created rated.
    pub rated_only: bool,
}

/// The finished games the games service publishes, in the order they finished.
#[tonic::async_trait]
pub trait FinishedFeed: Send + Sync + fmt::Debug {
    /// The page `query` names: ordered by (`finished_at_ms`, `game_id`); fewer than `limit` entries
    /// when there are no more now.
    async fn page(&self, query: &FeedQuery) -> RatingsResult<Vec<FeedEntry>>;
}

/// `Games.ListFinishedGames` over gRPC.
#[derive(Clone)]
pub struct GrpcFinishedFeed {
    channel: Channel,
    key: ServiceKey,
}

impl fmt::Debug for GrpcFinishedFeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcFinishedFeed").finish_non_exhaustive()
    }
}

impl GrpcFinishedFeed {
    /// A lazily connected client of the games service at `url` (`http://host:port`).
    pub fn new(
        url: &str,
        api_key: &str,
    ) -> Result<GrpcFinishedFeed, draughts_runtime::ConfigError> {
        Ok(GrpcFinishedFeed {
            channel: upstream::channel("--ratings-games-url", url, Some(upstream::CALL_TIMEOUT))?,
            key: ServiceKey::new(api_key)?,
        })
    }
}

#[tonic::async_trait]
impl FinishedFeed for GrpcFinishedFeed {
    async fn page(&self, query: &FeedQuery) -> RatingsResult<Vec<FeedEntry>> {
        let message = pb::ListFinishedGamesRequest {
            after_ms: query.after_ms,
            after_game_id: query.after_game_id.clone(),
            before_ms: query.before_ms,
            limit: u32::try_from(query.limit).unwrap_or(u32::MAX),
            rated_only: query.rated_only,
        };
        let request = self
            .key
            .request(message, None)
            .map_err(|e| RatingsError::Upstream(e.to_string()))?;
        let answer = pb::games_client::GamesClient::new(self.channel.clone())
            .list_finished_games(request)
            .await
            .map_err(|status| {
                RatingsError::Upstream(format!(
                    "Games.ListFinishedGames: {:?}: {}",
                    status.code(),
                    status.message()
                ))
            })?
            .into_inner();
        Ok(answer
            .games
            .into_iter()
            .map(|g| FeedEntry {
                game_id: g.game_id,
                finished_at_ms: g.finished_at_ms,
                event: g.event,
            })
            .collect())
    }
}
