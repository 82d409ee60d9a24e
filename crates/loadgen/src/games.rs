//! What the live-game load generators (`draughts-load-games`, `draughts-load-watch`) share: guests, a
//! game between two of them started the way clients start one (White invites, Black accepts), and a
//! position whose moves can cycle for a long time.

use draughts_proto::pb;
use draughts_proto::pb::auth_client::AuthClient;
use draughts_proto::pb::games_client::GamesClient;
use tonic::transport::Channel;

/// English, two kings each: no capture, no repetition rule, 80 plies before the no-progress draw.
pub const FEN: &str = "W:WK29,K32:BK1,K4";
/// Moves that cycle from [`FEN`], ply by ply.
pub const CYCLE: [&str; 4] = ["29-25", "1-5", "25-29", "5-1"];

/// `message` with `authorization: Bearer <token>` metadata.
pub fn authed<T>(token: &str, message: T) -> tonic::Request<T> {
    let mut req = tonic::Request::new(message);
    if let Ok(v) = format!("Bearer {token}").parse() {
        req.metadata_mut().insert("authorization", v);
    }
    req
}

/// A new guest: (player id, token).
pub async fn guest(ch: &Channel, name: &str) -> Result<(String, String), tonic::Status> {
    let r = AuthClient::new(ch.clone())
        .create_guest(pb::CreateGuestRequest {
            display_name: name.into(),
        })
        .await?
        .into_inner();
    Ok((r.player.map(|p| p.id).unwrap_or_default(), r.token))
}

/// A game from [`FEN`] between guests `w` and `b` (id, token): White invites, Black accepts.
pub async fn new_game(
    ch: &Channel,
    w: &(String, String),
    b: &(String, String),
) -> Result<String, tonic::Status> {
    let mut games = GamesClient::new(ch.clone());
    let invitation = games
        .create_invitation(authed(
            &w.1,
            pb::CreateInvitationRequest {
                rules: Some(pb::RuleSet {
                    variant: pb::Variant::English as i32,
                    options: None,
                }),
                time_control: Some(pb::TimeControl {
                    kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                        base_ms: 3_600_000,
                        increment_ms: 0,
                    })),
                }),
                invitee_id: b.0.clone(),
                color: pb::Color::White as i32,
                rated: false,
                fen: FEN.into(),
                expires_in_ms: 0,
                accept_key: String::new(),
            },
        ))
        .await?
        .into_inner();
    Ok(games
        .accept_invitation(authed(
            &b.1,
            pb::InvitationRequest {
                invitation_id: invitation.invitation_id,
                accept_key: String::new(),
            },
        ))
        .await?
        .into_inner()
        .game_id)
}
