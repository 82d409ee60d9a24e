//! What matchmaking asks of the rest of the platform, as traits (so the domain has no transport in it),
//! and their implementations over the public gRPC API: `Games` (agreed games and players' states with
//! matchmaking's service credential, an API key with the `admin` and `service` scopes; invitations on
//! behalf of the caller, whose `authorization` is passed on) and `Ratings` (ratings read with the
//! service credential). Every call with the service credential names the player it is made for
//! (`x-on-behalf-of`), so it counts against that player's own rate limit: no player can use up a
//! shared bucket. No other service's crate is used.

use std::fmt;

use async_trait::async_trait;
use draughts_auth::layer::ServiceKey;
use draughts_proto::pb;
use draughts_proto::vocab::rating::Category;
use draughts_proto::vocab::time::TimeControl;
use draughts_runtime::ConfigError;
use draughts_runtime::upstream::{self, UpstreamError};
use tonic::transport::Channel;

use crate::error::{MatchmakingError, MatchmakingResult};
use crate::pools::Pool;

/// A game both players agreed to by seeking in the same pool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgreedGame {
    /// Chosen by matchmaking (derived from the two seeks), so that a retried creation is idempotent.
    pub game_id: String,
    pub pool: Pool,
    pub white: String,
    pub black: String,
}

/// What matchmaking needs to know of a player before pairing them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlayerState {
    /// The player's ongoing games that are not correspondence (their ids).
    pub live_games: Vec<String>,
    /// How many of the player's last 5 finished games were aborted.
    pub recent_aborts: u32,
}

/// The Games service.
#[async_trait]
pub trait GamesPort: Send + Sync + fmt::Debug {
    /// Creates and starts `game` (idempotent under its id).
    async fn create_game(&self, game: &AgreedGame) -> MatchmakingResult<()>;
    async fn player_state(&self, player: &str) -> MatchmakingResult<PlayerState>;
    /// Invitation calls made for the caller (`authorization`: their metadata value, passed on).
    async fn invite(
        &self,
        authorization: &str,
        request: pb::CreateInvitationRequest,
    ) -> MatchmakingResult<pb::Invitation>;
    async fn rematch(
        &self,
        authorization: &str,
        game_id: &str,
    ) -> MatchmakingResult<pb::Invitation>;
    /// `accept_key`: the invitation's accept key (a lobby seek's), or empty.
    async fn accept(
        &self,
        authorization: &str,
        id: &str,
        accept_key: &str,
    ) -> MatchmakingResult<pb::GameView>;
    async fn decline(
        &self,
        authorization: &str,
        id: &str,
        reason: i32,
    ) -> MatchmakingResult<pb::Invitation>;
    async fn cancel(&self, authorization: &str, id: &str) -> MatchmakingResult<pb::Invitation>;
    /// How many games are in progress now (the lobby's number), as Games counts them.
    async fn games_in_progress(&self) -> MatchmakingResult<u64>;
}

/// A rating as pairing uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairingRating {
    /// Rating points, rounded.
    pub rating: i32,
    pub provisional: bool,
}

/// The Ratings service.
#[async_trait]
pub trait RatingsPort: Send + Sync + fmt::Debug {
    /// The player's rating in `pool`'s category; a player with no rating there gets the start rating,
    /// provisional.
    async fn rating(&self, player: &str, pool: &Pool) -> MatchmakingResult<PairingRating>;
}

/// The start rating of a player who has none (Glicko-2's 1500, as Ratings starts everyone).
pub const START_RATING: PairingRating = PairingRating {
    rating: 1500,
    provisional: true,
};

/// Games' and Ratings' public API over gRPC.
#[derive(Clone)]
pub struct GrpcPlatform {
    games: Channel,
    ratings: Channel,
    /// The service credential (an API key with the `admin` scope) for CreateGame.
    service_key: ServiceKey,
    /// Variants that Ratings rates per speed class (its `--per-speed-variants`; international by default).
    per_speed: Vec<draughts_engine::Variant>,
}

impl fmt::Debug for GrpcPlatform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcPlatform").finish_non_exhaustive()
    }
}

impl GrpcPlatform {
    /// Lazily connected clients of `games_url` and `ratings_url` (`http://host:port`; every call
    /// here is unary, so each is bounded by [`upstream::CALL_TIMEOUT`]).
    pub fn new(
        games_url: &str,
        ratings_url: &str,
        api_key: &str,
        per_speed: Vec<draughts_engine::Variant>,
    ) -> Result<GrpcPlatform, ConfigError> {
        Ok(GrpcPlatform {
            games: upstream::channel(
                "--matchmaking-games-url",
                games_url,
                Some(upstream::CALL_TIMEOUT),
            )?,
            ratings: upstream::channel(
                "--matchmaking-ratings-url",
                ratings_url,
                Some(upstream::CALL_TIMEOUT),
            )?,
            service_key: ServiceKey::new(api_key)?,
            per_speed,
        })
    }

    /// `message` with the service credential, made for `user` when it names one (`x-on-behalf-of`:
    /// the call counts against that user's own rate limit, not against matchmaking's key; see
    /// `draughts_auth::layer`).
    fn service_request<T>(
        &self,
        message: T,
        user: Option<&str>,
    ) -> MatchmakingResult<tonic::Request<T>> {
        self.service_key
            .request(message, user)
            .map_err(|e| MatchmakingError::Invalid(e.to_string()))
    }

    fn games(&self) -> pb::games_client::GamesClient<Channel> {
        pb::games_client::GamesClient::new(self.games.clone())
    }
}

fn request<T>(message: T, authorization: Option<&str>) -> MatchmakingResult<tonic::Request<T>> {
    let mut request = tonic::Request::new(message);
    if let Some(value) = authorization {
        let value = value
            .parse()
            .map_err(|_| MatchmakingError::Invalid("malformed authorization metadata".into()))?;
        request.metadata_mut().insert("authorization", value);
    }
    draughts_runtime::propagation::inject_into_request(request)
        .map_err(|status| upstream("Games", status))
}

/// A status answered by another service, as this service's error.
fn upstream(service: &'static str, status: tonic::Status) -> MatchmakingError {
    UpstreamError::from_status(service, &status).into()
}

/// The wire form of a pool's time control.
pub fn time_control_wire(time: &TimeControl) -> pb::TimeControl {
    time.to_wire()
}

#[async_trait]
impl GamesPort for GrpcPlatform {
    async fn create_game(&self, game: &AgreedGame) -> MatchmakingResult<()> {
        let player = |id: &str| {
            Some(pb::Player {
                id: id.to_owned(),
                ..Default::default()
            })
        };
        let message = pb::CreateGameRequest {
            rules: Some(pb::RuleSet {
                variant: draughts_proto::convert::variant_to_wire(game.pool.variant) as i32,
                options: None,
            }),
            time_control: Some(time_control_wire(&game.pool.time)),
            white: player(&game.white),
            black: player(&game.black),
            rated: game.pool.rated,
            fen: String::new(),
            game_id: game.game_id.clone(),
            berserk_allowed: false,
        };
        // For the player whose seek completed the pair (the later one of the two is as good as any:
        // each player's own seeks are bounded by their own limit).
        self.games()
            .create_game(self.service_request(message, Some(&game.black))?)
            .await
            .map_err(|s| upstream("Games", s))?;
        Ok(())
    }

    async fn games_in_progress(&self) -> MatchmakingResult<u64> {
        // For no player: it counts against matchmaking's own key (the callers share one cached
        // count per replica, see `MatchmakingCore::games_in_progress`).
        let request = self.service_request(pb::CountGamesInProgressRequest {}, None)?;
        Ok(self
            .games()
            .count_games_in_progress(request)
            .await
            .map_err(|s| upstream("Games", s))?
            .into_inner()
            .games_in_progress)
    }

    async fn player_state(&self, player: &str) -> MatchmakingResult<PlayerState> {
        let message = pb::ListGamesRequest {
            player_id: player.to_owned(),
            limit: 5,
            page_token: String::new(),
        };
        let list = self
            .games()
            .list_games(self.service_request(message, Some(player))?)
            .await
            .map_err(|s| upstream("Games", s))?
            .into_inner();
        let live_games = list
            .ongoing
            .iter()
            .filter(|g| {
                !matches!(
                    g.time_control.as_ref().and_then(|t| t.kind.as_ref()),
                    Some(pb::time_control::Kind::Correspondence(_))
                )
            })
            .map(|g| g.game_id.clone())
            .collect();
        let recent_aborts = list
            .recent
            .iter()
            .filter(|g| {
                g.status
                    .as_ref()
                    .is_some_and(|s| s.outcome == pb::Outcome::Aborted as i32)
            })
            .count();
        Ok(PlayerState {
            live_games,
            recent_aborts: u32::try_from(recent_aborts).unwrap_or(u32::MAX),
        })
    }

    async fn invite(
        &self,
        authorization: &str,
        message: pb::CreateInvitationRequest,
    ) -> MatchmakingResult<pb::Invitation> {
        Ok(self
            .games()
            .create_invitation(request(message, Some(authorization))?)
            .await
            .map_err(|s| upstream("Games", s))?
            .into_inner())
    }

    async fn rematch(
        &self,
        authorization: &str,
        game_id: &str,
    ) -> MatchmakingResult<pb::Invitation> {
        let message = pb::GameActionRequest {
            game_id: game_id.to_owned(),
        };
        Ok(self
            .games()
            .offer_rematch(request(message, Some(authorization))?)
            .await
            .map_err(|s| upstream("Games", s))?
            .into_inner())
    }

    async fn accept(
        &self,
        authorization: &str,
        id: &str,
        accept_key: &str,
    ) -> MatchmakingResult<pb::GameView> {
        let message = pb::InvitationRequest {
            invitation_id: id.to_owned(),
            accept_key: accept_key.to_owned(),
        };
        Ok(self
            .games()
            .accept_invitation(request(message, Some(authorization))?)
            .await
            .map_err(|s| upstream("Games", s))?
            .into_inner())
    }

    async fn decline(
        &self,
        authorization: &str,
        id: &str,
        reason: i32,
    ) -> MatchmakingResult<pb::Invitation> {
        let message = pb::DeclineInvitationRequest {
            invitation_id: id.to_owned(),
            reason,
        };
        Ok(self
            .games()
            .decline_invitation(request(message, Some(authorization))?)
            .await
            .map_err(|s| upstream("Games", s))?
            .into_inner())
    }

    async fn cancel(&self, authorization: &str, id: &str) -> MatchmakingResult<pb::Invitation> {
        let message = pb::InvitationRequest {
            invitation_id: id.to_owned(),
            accept_key: String::new(),
        };
        Ok(self
            .games()
            .cancel_invitation(request(message, Some(authorization))?)
            .await
            .map_err(|s| upstream("Games", s))?
            .into_inner())
    }
}

#[async_trait]
impl RatingsPort for GrpcPlatform {
    async fn rating(&self, player: &str, pool: &Pool) -> MatchmakingResult<PairingRating> {
        let message = pb::GetRatingRequest {
            player_id: player.to_owned(),
            category: Some(
                Category::of_game(pool.variant, Some(&pool.time), &self.per_speed).to_wire(),
            ),
        };
        let mut client = pb::ratings_client::RatingsClient::new(self.ratings.clone());
        match client
            .get_rating(self.service_request(message, Some(player))?)
            .await
        {
            Ok(rating) => {
                let rating = rating.into_inner();
                #[allow(clippy::cast_possible_truncation)]
                let points = rating.rating.round().clamp(0.0, 4000.0) as i32;
                Ok(PairingRating {
                    rating: points,
                    provisional: rating.provisional,
                })
            }
            Err(status) if status.code() == tonic::Code::NotFound => Ok(START_RATING),
            Err(status) => Err(upstream("Ratings", status)),
        }
    }
}
