//! Players and games the way clients make them: a guest (`Auth.CreateGuest`), and a game between two
//! people where the white player invites and the black player accepts (`Games.CreateInvitation` +
//! `Games.AcceptInvitation`).

use draughts_proto::pb;
use draughts_proto::pb::games_client::GamesClient;
use tonic::transport::Channel;

/// A guest as `Auth.CreateGuest` made it: its player id, display name and token.
#[derive(Clone, Debug)]
pub struct Guest {
    pub id: String,
    pub name: String,
    pub token: String,
}

/// A new guest named `name` (panics when the server refuses: a test's set-up).
pub async fn guest(channel: &Channel, name: &str) -> Guest {
    let made = pb::auth_client::AuthClient::new(channel.clone())
        .create_guest(pb::CreateGuestRequest {
            display_name: name.into(),
        })
        .await
        .unwrap_or_else(|e| panic!("CreateGuest {name}: {e}"))
        .into_inner();
    let player = made.player.unwrap_or_default();
    Guest {
        id: player.id,
        name: player.display_name,
        token: made.token,
    }
}

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
