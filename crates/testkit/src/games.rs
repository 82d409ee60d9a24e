//! Starting a game between two people the way clients do: the white player invites, the black player
//! accepts (`Games.CreateInvitation` + `Games.AcceptInvitation`).

use draughts_proto::pb;
use draughts_proto::pb::games_client::GamesClient;
use tonic::transport::Channel;

/// `request` with `authorization: Bearer <token>` metadata.
pub fn authed<T>(token: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Ok(value) = format!("Bearer {token}").parse() {
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// The game of `game` (a `CreateGameRequest` naming both players) agreed between two people: the player
/// holding `white_token` invites `game.black` with White, the one holding `black_token` accepts.
pub async fn agreed_game(
    channel: &Channel,
    white_token: &str,
    black_token: &str,
    game: pb::CreateGameRequest,
) -> Result<pb::GameView, tonic::Status> {
    let mut games = GamesClient::new(channel.clone());
    let invitation = games
        .create_invitation(authed(
            white_token,
            pb::CreateInvitationRequest {
                rules: game.rules,
                time_control: game.time_control,
                invitee_id: game.black.map(|p| p.id).unwrap_or_default(),
                color: pb::Color::White as i32,
                rated: game.rated,
                fen: game.fen,
                expires_in_ms: 0,
                accept_key: String::new(),
            },
        ))
        .await?
        .into_inner();
    Ok(games
        .accept_invitation(authed(
            black_token,
            pb::InvitationRequest {
                invitation_id: invitation.invitation_id,
                accept_key: String::new(),
            },
        ))
        .await?
        .into_inner())
}
