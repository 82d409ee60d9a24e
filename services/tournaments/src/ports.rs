//! What tournaments asks of the rest of the platform, as traits (the domain has no transport in it),
//! and their implementations over the public gRPC API with the service credential (an API key with
//! the `admin` and `service` scopes): Games creates the paired games (joining the tournament was the
//! players' consent), Ratings gives an entrant's rating. Every call names the player it is made for
//! (`x-on-behalf-of`), so it counts against that player's own rate limit. No other service's crate is
//! used.

use std::fmt;

use async_trait::async_trait;
use draughts_auth::layer::ServiceKey;
use draughts_proto::pb;
use draughts_proto::vocab::rating::Category;
use draughts_runtime::ConfigError;
use draughts_runtime::upstream::{self, UpstreamError};
use tonic::transport::Channel;

use crate::error::{TournamentsError, TournamentsResult};
use crate::terms::Terms;

/// A game to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewGame {
    /// Chosen by the service (`<tournament>-<n>`): a retried creation finds the same game.
    pub game_id: String,
    pub white: String,
    pub black: String,
}

/// The Games service.
#[async_trait]
pub trait GamesPort: Send + Sync + fmt::Debug {
    /// Creates and starts `game` under the event's terms (idempotent under its id).
    async fn create_game(&self, terms: &Terms, game: &NewGame) -> TournamentsResult<()>;
}

/// The Ratings service.
#[async_trait]
pub trait RatingsPort: Send + Sync + fmt::Debug {
    /// The player's rating (points) in the category of the event's variant and clock; the start
    /// rating (1500) when they have none.
    async fn rating(&self, player: &str, terms: &Terms) -> TournamentsResult<i32>;
}

/// The rating of a player who has none (Glicko-2's start, as Ratings starts everyone).
pub const START_RATING: i32 = 1500;

/// Games' and Ratings' public API over gRPC.
#[derive(Clone)]
pub struct GrpcPlatform {
    games: Channel,
    ratings: Channel,
    /// The service credential.
    service_key: ServiceKey,
    /// Variants Ratings rates per speed class (its `--per-speed-variants`).
    per_speed: Vec<draughts_engine::Variant>,
}

impl fmt::Debug for GrpcPlatform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcPlatform").finish_non_exhaustive()
    }
}

impl GrpcPlatform {
    /// Lazily connected clients of `games_url` and `ratings_url` (`http://host:port`; both calls
    /// are unary, each bounded by [`upstream::CALL_TIMEOUT`]).
    pub fn new(
        games_url: &str,
        ratings_url: &str,
        api_key: &str,
        per_speed: Vec<draughts_engine::Variant>,
    ) -> Result<GrpcPlatform, ConfigError> {
        Ok(GrpcPlatform {
            games: upstream::channel(
                "--tournaments-games-url",
                games_url,
                Some(upstream::CALL_TIMEOUT),
            )?,
            ratings: upstream::channel(
                "--tournaments-ratings-url",
                ratings_url,
                Some(upstream::CALL_TIMEOUT),
            )?,
            service_key: ServiceKey::new(api_key)?,
            per_speed,
        })
    }

    /// `message` with the service credential, made for `user` (`x-on-behalf-of`).
    fn request<T>(&self, message: T, user: &str) -> TournamentsResult<tonic::Request<T>> {
        self.service_key
            .request(message, Some(user))
            .map_err(|e| TournamentsError::Invalid(e.to_string()))
    }
}

/// A status answered by another service, as this service's error.
fn upstream(service: &'static str, status: tonic::Status) -> TournamentsError {
    UpstreamError::from_status(service, &status).into()
}

#[async_trait]
impl GamesPort for GrpcPlatform {
    async fn create_game(&self, terms: &Terms, game: &NewGame) -> TournamentsResult<()> {
        let player = |id: &str| {
            Some(pb::Player {
                id: id.to_owned(),
                ..Default::default()
            })
        };
        let message = pb::CreateGameRequest {
            rules: Some(draughts_proto::convert::rules_to_wire(terms.rule_set()?)),
            time_control: Some(terms.time_control.to_wire()),
            white: player(&game.white),
            black: player(&game.black),
            rated: terms.rated,
            fen: String::new(),
            game_id: game.game_id.clone(),
            // The event's term, said by this service (admin): players can never set it.
            berserk_allowed: terms.berserk_allowed(),
        };
        pb::games_client::GamesClient::new(self.games.clone())
            .create_game(self.request(message, &game.white)?)
            .await
            .map_err(|s| upstream("Games", s))?;
        Ok(())
    }
}

#[async_trait]
impl RatingsPort for GrpcPlatform {
    async fn rating(&self, player: &str, terms: &Terms) -> TournamentsResult<i32> {
        let variant = terms.rule_set()?.variant();
        let message = pb::GetRatingRequest {
            player_id: player.to_owned(),
            category: Some(
                Category::of_game(variant, Some(&terms.time_control), &self.per_speed).to_wire(),
            ),
        };
        let mut client = pb::ratings_client::RatingsClient::new(self.ratings.clone());
        match client.get_rating(self.request(message, player)?).await {
            Ok(rating) => {
                #[allow(clippy::cast_possible_truncation)]
                let points = rating.into_inner().rating.round().clamp(0.0, 4000.0) as i32;
                Ok(points)
            }
            Err(status) if status.code() == tonic::Code::NotFound => Ok(START_RATING),
            Err(status) => Err(upstream("Ratings", status)),
        }
    }
}
