//! Reading a stored game: through the public API (`draughts.v1.Games.GetGame`) at a configured address,
//! never through the games service's crate. The caller's `authorization` metadata is passed on, so the
//! Games service decides what the caller may read.

use std::fmt;

use async_trait::async_trait;
use draughts_proto::{convert, pb};
use draughts_runtime::ConfigError;
use draughts_runtime::upstream;
use tonic::transport::Channel;

use crate::contract::Line;
use crate::engine;
use crate::error::{AnalysisError, AnalysisResult};

/// Where games come from.
#[async_trait]
pub trait GameSource: Send + Sync + fmt::Debug {
    /// The game `game_id` as a line (rules, start FEN, every move played so far).
    async fn game(&self, game_id: &str, authorization: Option<&str>) -> AnalysisResult<Line>;
}

/// `Games.GetGame` over gRPC. Without an address, game ids are refused (FAILED_PRECONDITION).
#[derive(Clone, Debug)]
pub struct GrpcGames {
    channel: Option<Channel>,
}

impl GrpcGames {
    /// A lazily connected client of `url` (`http://host:port`; each call bounded by
    /// [`upstream::CALL_TIMEOUT`]); `None`: no Games service.
    pub fn new(url: Option<&str>) -> Result<GrpcGames, ConfigError> {
        let channel = match url {
            Some(url) => Some(upstream::channel(
                "--analysis-games-url",
                url,
                Some(upstream::CALL_TIMEOUT),
            )?),
            None => None,
        };
        Ok(GrpcGames { channel })
    }
}

/// A game view as a line: the moves replayed from their squares and written in the variant's notation.
pub fn view_to_line(view: &pb::GameView) -> AnalysisResult<Line> {
    let rules = convert::rule_set(view.rules.as_ref())?;
    let mut pos = convert::position(rules, &view.start_fen)?;
    let mut moves = Vec::with_capacity(view.moves.len());
    for played in &view.moves {
        let squares = played.r#move.as_ref().map(|m| pb::MoveInput {
            r#move: Some(pb::move_input::Move::Squares(pb::MoveSquares {
                squares: m.path.clone(),
            })),
        });
        let mv = convert::resolve_move(&pos, squares.as_ref()).map_err(|e| {
            AnalysisError::Precondition(format!("stored game does not replay: {e}"))
        })?;
        moves.push(pos.move_to_text(&mv));
        pos = pos.play_unchecked(&mv);
    }
    Ok(Line {
        rules: engine::rules_to_contract(rules),
        fen: convert::position(rules, &view.start_fen)?.to_fen(),
        moves,
    })
}

#[async_trait]
impl GameSource for GrpcGames {
    async fn game(&self, game_id: &str, authorization: Option<&str>) -> AnalysisResult<Line> {
        let Some(channel) = self.channel.clone() else {
            return Err(AnalysisError::Precondition(
                "this server reads no stored games (no games address configured): send the game as PDN"
                    .into(),
            ));
        };
        let mut client = pb::games_client::GamesClient::new(channel);
        let mut request = tonic::Request::new(pb::GetGameRequest {
            game_id: game_id.to_owned(),
        });
        if let Some(value) = authorization.and_then(|a| a.parse().ok()) {
            request.metadata_mut().insert("authorization", value);
        }
        let request = draughts_runtime::propagation::inject_into_request(request)
            .map_err(AnalysisError::GamesUnavailable)?;
        match client.get_game(request).await {
            Ok(view) => view_to_line(view.get_ref()),
            Err(status) if status.code() == tonic::Code::NotFound => {
                Err(AnalysisError::NoGame(game_id.to_owned()))
            }
            Err(status) if status.code() == tonic::Code::InvalidArgument => Err(
                AnalysisError::Invalid(format!("game id: {}", status.message())),
            ),
            Err(status) => Err(AnalysisError::GamesUnavailable(status)),
        }
    }
}
