//! `draughts.v1.Ratings` over gRPC: convert, call [`RatingsCore`], convert back. `RecordResult` checks
//! the caller's `admin` scope (the server is registered behind the authentication layer).

use draughts_auth::Scope;
use draughts_proto::{ErrorKind, ServiceError, convert, pb};
use tonic::{Request, Response, Status};

use crate::category::{Category, Speed, TimeControl};
use crate::domain::{HistoryEntry, RatingView, RatingsCore};
use crate::error::RatingsError;
use crate::event::{FinishedGame, Outcome, Player};

/// The Ratings gRPC service.
#[derive(Clone, Debug)]
pub struct RatingsService {
    core: RatingsCore,
    /// Who players are (names, since when) for profiles.
    identities: Option<draughts_auth::Identities>,
}

impl RatingsService {
    pub fn new(core: RatingsCore) -> RatingsService {
        RatingsService {
            core,
            identities: None,
        }
    }

    /// Whether `player_id` is a BOT, for an import: the identity registry's word (an unreadable
    /// registry is UNAVAILABLE, never a guess; without a registry, or for an id that is not a
    /// player's, a person).
    async fn is_bot_strict(&self, player_id: &str) -> Result<bool, Status> {
        let (Some(identities), Ok(id)) = (
            &self.identities,
            draughts_proto::ids::PlayerId::parse(player_id),
        ) else {
            return Ok(false);
        };
        match identities.lookup(&id).await {
            Ok(found) => Ok(found.is_some_and(|identity| identity.bot)),
            Err(e) => {
                tracing::warn!(error = %e, "identity registry unavailable for an import");
                Err(RatingsError::Unavailable.to_status())
            }
        }
    }

    /// The same service, naming players in profiles from `identities`.
    #[must_use]
    pub fn with_identities(mut self, identities: draughts_auth::Identities) -> RatingsService {
        self.identities = Some(identities);
        self
    }
}

/// Recent games a profile lists when the request says 0, and at most.
const PROFILE_RECENT_DEFAULT: u32 = 10;
const PROFILE_RECENT_MAX: u32 = 50;

fn err(e: RatingsError) -> Status {
    if e.kind() == ErrorKind::Internal {
        tracing::error!(error = %e, "ratings: internal error");
    }
    e.to_status()
}

/// INVALID_ARGUMENT through the one status table.
fn invalid(message: impl Into<String>) -> Status {
    RatingsError::InvalidArgument(message.into()).to_status()
}

fn now_ms() -> u64 {
    draughts_store::now_unix_ms()
}

fn speed_from_wire(speed: i32) -> Result<Option<Speed>, Status> {
    pb::SpeedClass::try_from(speed)
        .map(Speed::from_wire)
        .map_err(|_| invalid(format!("unknown speed class {speed}")))
}

fn category(wire: Option<&pb::RatingCategory>) -> Result<Category, Status> {
    let wire = wire.ok_or_else(|| invalid("category is required (a variant at least)"))?;
    Ok(Category {
        variant: convert::variant(wire.variant)?,
        speed: speed_from_wire(wire.speed)?,
    })
}

fn rating_to_wire(view: RatingView) -> pb::Rating {
    pb::Rating {
        player_id: view.player_id,
        category: Some(view.category.to_wire()),
        rating: view.glicko.rating,
        deviation: view.glicko.deviation,
        volatility: view.glicko.volatility,
        provisional: view.provisional,
        games: view.games,
        wins: view.wins,
        draws: view.draws,
        losses: view.losses,
        last_game_at_ms: view.last_game_at_ms,
    }
}

fn history_to_wire(entry: HistoryEntry) -> pb::RatingHistoryEntry {
    pb::RatingHistoryEntry {
        at_ms: entry.at_ms,
        rating: entry.glicko.rating,
        deviation: entry.glicko.deviation,
        volatility: entry.glicko.volatility,
        rating_change: entry.rating_change,
        game_id: entry.game_id,
        games: entry.games,
        games_total: entry.games_total,
    }
}

fn time_control(wire: Option<&pb::TimeControl>) -> Result<Option<TimeControl>, Status> {
    match wire.and_then(|tc| tc.kind.as_ref()) {
        None => Ok(None),
        Some(pb::time_control::Kind::Fischer(f)) => {
            if f.base_ms == 0 && f.increment_ms == 0 {
                return Err(invalid(
                    "a Fischer time control needs a base or an increment",
                ));
            }
            Ok(Some(TimeControl::Fischer {
                base_ms: f.base_ms,
                increment_ms: f.increment_ms,
            }))
        }
        Some(pb::time_control::Kind::Correspondence(c)) => {
            if c.days_per_move == 0 {
                return Err(invalid(
                    "a correspondence time control needs at least one day per move",
                ));
            }
            Ok(Some(TimeControl::Correspondence {
                days_per_move: c.days_per_move,
            }))
        }
    }
}

fn side(wire: Option<&pb::Player>, which: &str) -> Result<Player, Status> {
    let player = wire.ok_or_else(|| invalid(format!("{which} is required")))?;
    // An import may name players of before the id checks, as their stored games do.
    let id = draughts_proto::ids::PlayerId::parse_stored(player.id.trim())
        .map_err(|e| invalid(format!("{which}.id: {e}")))?;
    Ok(Player {
        name: player.display_name.clone(),
        guest: player.guest,
        computer: player.computer,
        // The server's word only: set from the identity registry by `record_result`.
        bot: false,
        ..Player::new(id)
    })
}

fn finished_game(req: &pb::RecordResultRequest) -> Result<FinishedGame, Status> {
    let outcome = match pb::Outcome::try_from(req.outcome) {
        Ok(pb::Outcome::WhiteWins) => Outcome::WhiteWins,
        Ok(pb::Outcome::BlackWins) => Outcome::BlackWins,
        Ok(pb::Outcome::Draw) => Outcome::Draw,
        _ => {
            return Err(invalid(
                "outcome must be OUTCOME_WHITE_WINS, OUTCOME_BLACK_WINS or OUTCOME_DRAW",
            ));
        }
    };
    let game = FinishedGame {
        game_id: req.game_id.trim().to_owned(),
        variant: convert::variant(req.variant)?,
        options: String::new(),
        rated: true,
        white: side(req.white.as_ref(), "white")?,
        black: side(req.black.as_ref(), "black")?,
        outcome,
        time_control: time_control(req.time_control.as_ref())?,
        finished_at_ms: if req.finished_at_ms == 0 {
            now_ms()
        } else {
            req.finished_at_ms
        },
        traceparent: None,
    };
    game.check().map_err(invalid)?;
    if game.white.id == game.black.id {
        return Err(invalid("white and black must be different players"));
    }
    Ok(game)
}

#[tonic::async_trait]
impl pb::ratings_server::Ratings for RatingsService {
    #[tracing::instrument(skip_all, fields(player_id = %req.get_ref().player_id))]
    async fn get_rating(
        &self,
        req: Request<pb::GetRatingRequest>,
    ) -> Result<Response<pb::Rating>, Status> {
        let req = req.into_inner();
        let category = category(req.category.as_ref())?;
        let view = self
            .core
            .rating(&req.player_id, category, now_ms())
            .await
            .map_err(err)?;
        Ok(Response::new(rating_to_wire(view)))
    }

    #[tracing::instrument(skip_all, fields(player_id = %req.get_ref().player_id))]
    async fn get_ratings(
        &self,
        req: Request<pb::GetRatingsRequest>,
    ) -> Result<Response<pb::GetRatingsResponse>, Status> {
        let views = self
            .core
            .ratings(&req.get_ref().player_id, now_ms())
            .await
            .map_err(err)?;
        Ok(Response::new(pb::GetRatingsResponse {
            ratings: views.into_iter().map(rating_to_wire).collect(),
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn leaderboard(
        &self,
        req: Request<pb::LeaderboardRequest>,
    ) -> Result<Response<pb::LeaderboardResponse>, Status> {
        let req = req.into_inner();
        let category = category(req.category.as_ref())?;
        let page = self
            .core
            .leaderboard(category, req.bots, req.page_size, &req.page_token, now_ms())
            .await
            .map_err(err)?;
        // The mark is the row's own (bots are rated in a table of their own since the mark exists;
        // no row of a bot predates it), so a page costs no registry read.
        let entries = page
            .entries
            .into_iter()
            .map(|(rank, view)| pb::LeaderboardEntry {
                rank,
                bot: view.bot,
                rating: Some(rating_to_wire(view)),
            })
            .collect();
        Ok(Response::new(pb::LeaderboardResponse {
            entries,
            next_page_token: page.next_page_token.unwrap_or_default(),
        }))
    }

    #[tracing::instrument(skip_all, fields(player_id = %req.get_ref().player_id))]
    async fn rating_history(
        &self,
        req: Request<pb::RatingHistoryRequest>,
    ) -> Result<Response<pb::RatingHistoryResponse>, Status> {
        let req = req.into_inner();
        let category = category(req.category.as_ref())?;
        let page = self
            .core
            .history(&req.player_id, category, req.page_size, &req.page_token)
            .await
            .map_err(err)?;
        Ok(Response::new(pb::RatingHistoryResponse {
            entries: page.entries.into_iter().map(history_to_wire).collect(),
            next_page_token: page.next_page_token.unwrap_or_default(),
        }))
    }

    #[tracing::instrument(skip_all, fields(player_id = %req.get_ref().player_id))]
    async fn get_profile(
        &self,
        req: Request<pb::GetProfileRequest>,
    ) -> Result<Response<pb::Profile>, Status> {
        let req = req.into_inner();
        let id = draughts_proto::ids::PlayerId::parse(&req.player_id)
            .map_err(|e| invalid(e.to_string()))?;
        let recent = match req.recent_games {
            0 => PROFILE_RECENT_DEFAULT,
            n if n <= PROFILE_RECENT_MAX => n,
            n => {
                return Err(invalid(format!(
                    "recent_games must be at most {PROFILE_RECENT_MAX}, got {n}"
                )));
            }
        };
        let identity = match &self.identities {
            Some(identities) => identities.lookup(&id).await.map_err(|e| {
                tracing::warn!(error = %e, "identity registry unavailable for a profile");
                RatingsError::Unavailable.to_status()
            })?,
            None => None,
        };
        let now = now_ms();
        let views = self.core.ratings(id.as_str(), now).await.map_err(err)?;
        if identity.is_none() && views.is_empty() {
            return Err(RatingsError::NotFound(format!("no player with id '{id}'")).to_status());
        }
        let (mut wins, mut draws, mut losses) = (0, 0, 0);
        let mut ratings = Vec::with_capacity(views.len());
        for view in views {
            wins += view.wins;
            draws += view.draws;
            losses += view.losses;
            let rank = self.core.rank(&view, now).await.map_err(err)?.unwrap_or(0);
            ratings.push(pb::ProfileRating {
                rating: Some(rating_to_wire(view)),
                rank,
            });
        }
        let recent_games = self
            .core
            .recent_updates(id.as_str(), recent)
            .await
            .map_err(err)?
            .into_iter()
            .map(|(category, entry)| pb::ProfileGame {
                game_id: entry.game_id,
                category: Some(category.to_wire()),
                at_ms: entry.at_ms,
                rating: entry.glicko.rating,
                rating_change: entry.rating_change,
            })
            .collect();
        let (display_name, since_ms, bot) = identity
            .map(|i| (i.name, i.since_ms, i.bot))
            .unwrap_or_else(|| (id.to_string(), 0, false));
        Ok(Response::new(pb::Profile {
            player: Some(pb::Player {
                id: id.to_string(),
                display_name,
                guest: id.is_guest(),
                computer: id.is_computer(),
                bot,
            }),
            since_ms,
            ratings,
            wins,
            draws,
            losses,
            recent_games,
            account: id.is_account(),
        }))
    }

    #[tracing::instrument(skip_all)]
    async fn predict_result(
        &self,
        req: Request<pb::PredictResultRequest>,
    ) -> Result<Response<pb::PredictResultResponse>, Status> {
        let req = req.into_inner();
        let category = category(req.category.as_ref())?;
        let prediction = self
            .core
            .predict(&req.player_a, &req.player_b, category, now_ms())
            .await
            .map_err(err)?;
        Ok(Response::new(pb::PredictResultResponse {
            expected_score_a: prediction.expected_a,
            expected_score_b: 1.0 - prediction.expected_a,
            rating_a: Some(rating_to_wire(prediction.a)),
            rating_b: Some(rating_to_wire(prediction.b)),
        }))
    }

    #[tracing::instrument(skip_all, fields(game_id = %req.get_ref().game_id))]
    async fn record_result(
        &self,
        req: Request<pb::RecordResultRequest>,
    ) -> Result<Response<pb::RecordResultResponse>, Status> {
        let caller = draughts_auth::principal(&req)?;
        draughts_auth::require(&caller, Scope::Admin)?;
        let mut game = finished_game(req.get_ref())?;
        game.white.bot = self.is_bot_strict(&game.white.id).await?;
        game.black.bot = self.is_bot_strict(&game.black.id).await?;
        let outcome = self.core.record(&game, now_ms()).await.map_err(err)?;
        tracing::info!(
            game_id = %game.game_id,
            by = %caller.player_id,
            recorded = outcome.recorded,
            "result imported"
        );
        Ok(Response::new(pb::RecordResultResponse {
            recorded: outcome.recorded,
            pending: outcome.pending,
            skipped_reason: outcome.skipped_reason.unwrap_or_default().to_owned(),
            white: Some(rating_to_wire(outcome.white)),
            black: Some(rating_to_wire(outcome.black)),
        }))
    }
}
