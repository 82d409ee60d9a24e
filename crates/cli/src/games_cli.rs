//! `draughts client` commands for live games: guests, creating, playing (against a person or the
//! built-in opponent) and watching.

use std::io::BufRead;

use clap::Args;
use draughts_engine::{Color, Position};
use draughts_proto::pb;
use draughts_proto::pb::games_client::GamesClient;
use tonic::transport::Channel;

use crate::CliError;
use crate::client::{Caller, Target, call, rules_of, status_error};

/// A guest identity.
pub struct Guest {
    pub id: String,
    pub token: String,
}

pub async fn create_guest(ch: &Channel, caller: &Caller, name: &str) -> Result<Guest, CliError> {
    let auth = pb::auth_client::AuthClient::new(ch.clone());
    let r = call!(
        caller,
        auth,
        create_guest,
        pb::CreateGuestRequest {
            display_name: name.into(),
        }
    )
    .map_err(status_error)?;
    Ok(Guest {
        id: r.player.map(|p| p.id).unwrap_or_default(),
        token: r.token,
    })
}

fn need_token(caller: &Caller) -> Result<&Caller, CliError> {
    if caller.has_token() {
        Ok(caller)
    } else {
        Err(CliError(
            "this command needs --token (get one with `draughts client guest`)".into(),
        ))
    }
}

/// The caller's player id (`Auth.WhoAmI`).
async fn my_id(ch: &Channel, caller: &Caller) -> Result<String, CliError> {
    let auth = pb::auth_client::AuthClient::new(ch.clone());
    Ok(call!(caller, auth, who_am_i, pb::WhoAmIRequest {})
        .map_err(status_error)?
        .player
        .map(|p| p.id)
        .unwrap_or_default())
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    #[command(flatten)]
    target: Target,
    /// The invited player's id (e.g. from their `client guest`).
    #[arg(long)]
    opponent: String,
    /// Play Black (default: White).
    #[arg(long)]
    black: bool,
    /// Fischer base time, seconds.
    #[arg(long, default_value_t = 300)]
    base: u64,
    /// Fischer increment, seconds.
    #[arg(long, default_value_t = 3)]
    increment: u64,
    /// Correspondence instead: days per move.
    #[arg(long)]
    days: Option<u32>,
    #[arg(long)]
    rated: bool,
}

fn time_control(base: u64, increment: u64, days: Option<u32>) -> pb::TimeControl {
    use pb::time_control::Kind;
    pb::TimeControl {
        kind: Some(match days {
            Some(d) => Kind::Correspondence(pb::Correspondence { days_per_move: d }),
            None => Kind::Fischer(pb::Fischer {
                base_ms: base * 1000,
                increment_ms: increment * 1000,
            }),
        }),
    }
}

/// Invites the opponent (`Games.CreateInvitation`); the game starts when they accept it
/// (`draughts client accept INVITATION_ID`). Prints the invitation id, which is also the game's id.
pub async fn create(ch: &Channel, caller: &Caller, a: CreateArgs) -> Result<(), CliError> {
    let caller = need_token(caller)?;
    let req = pb::CreateInvitationRequest {
        rules: rules_of(&a.target)?,
        time_control: Some(time_control(a.base, a.increment, a.days)),
        invitee_id: a.opponent.clone(),
        color: if a.black {
            pb::Color::Black
        } else {
            pb::Color::White
        } as i32,
        rated: a.rated,
        fen: a.target.fen.clone(),
        expires_in_ms: 0,
        accept_key: String::new(),
    };
    let games = GamesClient::new(ch.clone());
    let invitation = call!(caller, games, create_invitation, req).map_err(status_error)?;
    out!("{}", invitation.invitation_id);
    eprintln!(
        "invitation sent; the game starts when {} runs `draughts client accept {}`",
        a.opponent, invitation.invitation_id
    );
    Ok(())
}

/// Accepts an invitation (`Games.AcceptInvitation`); prints the game's id.
pub async fn accept(ch: &Channel, caller: &Caller, invitation_id: &str) -> Result<(), CliError> {
    let caller = need_token(caller)?;
    let games = GamesClient::new(ch.clone());
    let game = call!(
        caller,
        games,
        accept_invitation,
        pb::InvitationRequest {
            invitation_id: invitation_id.into(),
            accept_key: String::new(),
        }
    )
    .map_err(status_error)?;
    out!("{}", game.game_id);
    Ok(())
}

fn variant_of(view: &pb::GameView) -> Result<Position, CliError> {
    let rules = draughts_proto::convert::rule_set(view.rules.as_ref())?;
    let fen = view.position.as_ref().map(|p| p.fen.as_str()).unwrap_or("");
    Ok(draughts_proto::convert::position(rules, fen)?)
}

fn show(view: &pb::GameView) -> Result<(), CliError> {
    let clocks = view.clocks.unwrap_or_default();
    let last = view
        .moves
        .last()
        .and_then(|m| m.r#move.as_ref())
        .map(|m| m.notation.as_str())
        .unwrap_or("-");
    out!(
        "ply {}  last {}  white {:.1}s  black {:.1}s  {}",
        view.moves.len(),
        last,
        clocks.white_ms as f64 / 1000.0,
        clocks.black_ms as f64 / 1000.0,
        view.status
            .as_ref()
            .map(|s| s.description.as_str())
            .unwrap_or("")
    );
    for (side, berserk) in [("white", view.white_berserk), ("black", view.black_berserk)] {
        if berserk {
            out!("{side} is berserk (half the time, no increment)");
        }
    }
    if let Some(p) = &view.position {
        out!("fen {}", p.fen);
    }
    Ok(())
}

/// Whether `me` may still go berserk in `view`: the game allows it, `me` has not and has not moved.
fn may_go_berserk(view: &pb::GameView, me: Color) -> bool {
    let berserk = match me {
        Color::White => view.white_berserk,
        Color::Black => view.black_berserk,
    };
    let mine = draughts_proto::convert::color_to_wire(me) as i32;
    let moved = view.moves.len() >= 2 || view.moves.first().is_some_and(|m| m.side == mine);
    view.berserk_allowed && !berserk && !moved && !over(view)
}

/// Games.Berserk for the caller; prints the game after it.
pub async fn berserk(ch: &Channel, caller: &Caller, game_id: &str) -> Result<(), CliError> {
    let caller = need_token(caller)?;
    let games = GamesClient::new(ch.clone());
    let view = call!(
        caller,
        games,
        berserk,
        pb::GameActionRequest {
            game_id: game_id.into(),
        }
    )
    .map_err(status_error)?;
    show(&view)?;
    Ok(())
}

fn over(view: &pb::GameView) -> bool {
    view.status
        .as_ref()
        .is_some_and(|s| s.outcome != pb::Outcome::Ongoing as i32)
}

/// What `play` says when its input ends: the game is not resigned (the opponent is a person who may
/// be thinking), so it goes on without us.
pub const LEFT_THE_GAME: &str = "end of input: you left the game; it goes on and your clock runs (run `draughts client play GAME_ID` again to come back)";

/// What the end of input does to a game being played from the terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AtEndOfInput {
    /// Leave the game: it goes on and the player's clock runs (the opponent is a person who may be
    /// thinking, and the player may come back).
    Leave,
    /// End it: abort before both sides moved, else resign (nobody comes back to a game against the
    /// computer started from this command).
    End,
}

/// Plays `game_id` as `caller`: reads moves from stdin when it is their turn. Every call carries the
/// caller's token.
pub async fn play(ch: &Channel, caller: &Caller, game_id: &str) -> Result<(), CliError> {
    let caller = need_token(caller)?;
    play_from_terminal(ch, caller, game_id, AtEndOfInput::Leave).await
}

/// The terminal side of a game: shows the game, reads the caller's move when it is their turn, waits
/// for the opponent's (a person's, or the server's computer's) through `WatchGame` otherwise.
async fn play_from_terminal(
    ch: &Channel,
    caller: &Caller,
    game_id: &str,
    at_end: AtEndOfInput,
) -> Result<(), CliError> {
    let me = my_id(ch, caller).await?;
    let games = GamesClient::new(ch.clone());
    let mut stdin = std::io::stdin().lock().lines();
    let action = pb::GameActionRequest {
        game_id: game_id.into(),
    };
    loop {
        let view = call!(
            caller,
            games,
            get_game,
            pb::GetGameRequest {
                game_id: game_id.into(),
            }
        )
        .map_err(status_error)?;
        show(&view)?;
        if over(&view) {
            return Ok(());
        }
        let pos = variant_of(&view)?;
        let my_color = if view.white.as_ref().is_some_and(|p| p.id == me) {
            Color::White
        } else {
            Color::Black
        };
        if pos.side_to_move() == my_color {
            let moves: Vec<String> = pos
                .legal_moves()
                .iter()
                .map(|m| pos.move_to_text(m))
                .collect();
            let berserk = if may_go_berserk(&view, my_color) {
                " / 'berserk'"
            } else {
                ""
            };
            out!(
                "your move ({}), or 'resign' / 'draw'{berserk}:",
                moves.join(" ")
            );
            let Some(line) = stdin.next() else {
                match at_end {
                    AtEndOfInput::Leave => out!("{LEFT_THE_GAME}"),
                    AtEndOfInput::End => {
                        let ended = if view.moves.len() < 2 {
                            call!(caller, games, abort, action.clone()).map(|_| "aborted")
                        } else {
                            call!(caller, games, resign, action.clone()).map(|_| "resigned")
                        };
                        let ended = ended.map_err(status_error)?;
                        out!("end of input: the game against the computer is {ended}");
                    }
                }
                return Ok(());
            };
            let line = line.map_err(|e| CliError(e.to_string()))?;
            let r = match line.trim() {
                "resign" => call!(caller, games, resign, action.clone()),
                "draw" => call!(caller, games, offer_draw, action.clone()),
                "berserk" => call!(caller, games, berserk, action.clone()),
                "" => continue,
                mv => call!(
                    caller,
                    games,
                    play_move,
                    pb::PlayMoveRequest {
                        game_id: game_id.into(),
                        r#move: Some(pb::MoveInput {
                            r#move: Some(pb::move_input::Move::Text(mv.into())),
                        }),
                        expected_ply: Some(
                            view.moves.len() as u32 + view.first_ply.saturating_sub(1),
                        ),
                    }
                ),
            };
            if let Err(e) = r {
                out!("refused: {}", e.message());
            }
        } else {
            out!("waiting for the opponent...");
            let mut stream = call!(
                caller,
                games,
                watch_game,
                pb::WatchGameRequest {
                    game_id: game_id.into(),
                }
            )
            .map_err(status_error)?;
            // Skip the history, wait for the next event.
            let seen = view.revision;
            while let Some(e) = stream.message().await.map_err(status_error)? {
                if e.seq > seen {
                    break;
                }
            }
        }
    }
}

#[derive(Args, Debug)]
pub struct BotArgs {
    #[command(flatten)]
    target: Target,
    /// The computer's level, 1 (weakest) to 8 (strongest): the server plays `ai:<level>`.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=8))]
    level: u8,
    /// Play Black (default: White).
    #[arg(long)]
    black: bool,
    /// Fischer base time, seconds.
    #[arg(long, default_value_t = 600)]
    base: u64,
    /// Fischer increment, seconds.
    #[arg(long, default_value_t = 5)]
    increment: u64,
}

/// Plays a whole game against the server's computer (`ai:<level>`, moved by the analysis service)
/// from the terminal. The calls carry the player's token (a new guest's without `--token`).
pub async fn bot(ch: &Channel, caller: &Caller, a: BotArgs) -> Result<(), CliError> {
    let me = if caller.has_token() {
        caller.clone()
    } else {
        Caller::new(Some(&create_guest(ch, caller, "You").await?.token))?
    };
    let computer = pb::Player {
        id: format!("ai:{}", a.level),
        ..Default::default()
    };
    // An empty id stands for the caller.
    let (white, black) = if a.black {
        (computer, pb::Player::default())
    } else {
        (pb::Player::default(), computer)
    };
    let games = GamesClient::new(ch.clone());
    let g = call!(
        me,
        games,
        create_game,
        pb::CreateGameRequest {
            rules: rules_of(&a.target)?,
            time_control: Some(time_control(a.base, a.increment, None)),
            white: Some(white),
            black: Some(black),
            rated: false,
            fen: a.target.fen.clone(),
            game_id: String::new(),
            berserk_allowed: false,
        }
    )
    .map_err(status_error)?;
    out!("game {} against ai:{}", g.game_id, a.level);
    play_from_terminal(ch, &me, &g.game_id, AtEndOfInput::End).await
}

/// Prints every event of a game until it ends.
pub async fn watch(ch: &Channel, caller: &Caller, game_id: &str) -> Result<(), CliError> {
    let games = GamesClient::new(ch.clone());
    let mut stream = call!(
        caller,
        games,
        watch_game,
        pb::WatchGameRequest {
            game_id: game_id.into(),
        }
    )
    .map_err(status_error)?;
    while let Some(e) = stream.message().await.map_err(status_error)? {
        use pb::game_event::Kind;
        match e.kind {
            Some(Kind::Created(g)) => out!(
                "#{} created: {} vs {}",
                e.seq,
                g.white.map(|p| p.display_name).unwrap_or_default(),
                g.black.map(|p| p.display_name).unwrap_or_default()
            ),
            Some(Kind::MovePlayed(m)) => {
                let c = m.clocks.unwrap_or_default();
                out!(
                    "#{} ply {} {}  (white {:.1}s, black {:.1}s)",
                    e.seq,
                    m.ply,
                    m.r#move.map(|x| x.notation).unwrap_or_default(),
                    c.white_ms as f64 / 1000.0,
                    c.black_ms as f64 / 1000.0
                );
            }
            Some(Kind::DrawOffered(c)) => out!("#{} draw offered by {}", e.seq, color_name(c)),
            Some(Kind::DrawDeclined(c)) => {
                out!("#{} draw declined by {}", e.seq, color_name(c))
            }
            Some(Kind::Finished(s)) => out!("#{} {} ({})", e.seq, s.description, s.result),
            Some(Kind::Berserk(c)) => out!(
                "#{} {} went berserk (half the time, no increment)",
                e.seq,
                color_name(c)
            ),
            None => {}
        }
    }
    Ok(())
}

fn color_name(c: i32) -> &'static str {
    if c == pb::Color::White as i32 {
        "white"
    } else {
        "black"
    }
}
