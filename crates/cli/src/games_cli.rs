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
    };
    let games = GamesClient::new(ch.clone());
    let invitation = call!(caller, games, create_invitation, req).map_err(status_error)?;
    println!("{}", invitation.invitation_id);
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
        }
    )
    .map_err(status_error)?;
    println!("{}", game.game_id);
    Ok(())
}

fn variant_of(view: &pb::GameView) -> Result<Position, CliError> {
    let rules = draughts_proto::convert::rule_set(view.rules.as_ref())?;
    let fen = view.position.as_ref().map(|p| p.fen.as_str()).unwrap_or("");
    Ok(draughts_proto::convert::position(rules, fen)?)
}

fn show(view: &pb::GameView) {
    let clocks = view.clocks.unwrap_or_default();
    let last = view
        .moves
        .last()
        .and_then(|m| m.r#move.as_ref())
        .map(|m| m.notation.as_str())
        .unwrap_or("-");
    println!(
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
    if let Some(p) = &view.position {
        println!("fen {}", p.fen);
    }
}

fn over(view: &pb::GameView) -> bool {
    view.status
        .as_ref()
        .is_some_and(|s| s.outcome != pb::Outcome::Ongoing as i32)
}

/// What `play` says when its input ends: the game is not resigned (the opponent is a person who may
/// be thinking), so it goes on without us.
pub const LEFT_THE_GAME: &str = "end of input: you left the game; it goes on and your clock runs (run `draughts client play GAME_ID` again to come back)";

/// Plays `game_id` as `caller`: reads moves from stdin when it is their turn. Every call carries the
/// caller's token.
pub async fn play(ch: &Channel, caller: &Caller, game_id: &str) -> Result<(), CliError> {
    let caller = need_token(caller)?;
    let me = my_id(ch, caller).await?;
    let games = GamesClient::new(ch.clone());
    let mut stdin = std::io::stdin().lock().lines();
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
        show(&view);
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
            println!("your move ({}), or 'resign' / 'draw':", moves.join(" "));
            let Some(line) = stdin.next() else {
                println!("{LEFT_THE_GAME}");
                return Ok(());
            };
            let line = line.map_err(|e| CliError(e.to_string()))?;
            let line = line.trim();
            let action = pb::GameActionRequest {
                game_id: game_id.into(),
            };
            let r = match line {
                "resign" => call!(caller, games, resign, action),
                "draw" => call!(caller, games, offer_draw, action),
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
                println!("refused: {}", e.message());
            }
        } else {
            println!("waiting for the opponent...");
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

/// The built-in opponent: takes the most pieces it can, else a move that does not hang a piece to an
/// immediate capture, else any move (deterministic). The AI service replaces it with real search.
fn bot_move(pos: &Position) -> Option<draughts_engine::Move> {
    let moves = pos.legal_moves();
    let safe = |m: &draughts_engine::Move| {
        let next = pos.play_unchecked(m);
        !next.has_capture()
    };
    moves
        .iter()
        .max_by_key(|m| (m.n_captured(), safe(m), m.promotes()))
        .copied()
}

/// Plays a whole game against the built-in opponent from the terminal. The player's calls carry the
/// player's token (a new guest's without `--token`), the bot's calls the bot guest's.
pub async fn bot(ch: &Channel, caller: &Caller, a: BotArgs) -> Result<(), CliError> {
    let me = if caller.has_token() {
        caller.clone()
    } else {
        Caller::new(Some(&create_guest(ch, caller, "You").await?.token))?
    };
    let bot = create_guest(ch, &me, "Built-in bot").await?;
    let bot_caller = Caller::new(Some(&bot.token))?;
    // The bot is a second guest of this process: it is invited, and accepts.
    let games = GamesClient::new(ch.clone());
    let invitation = call!(
        me,
        games,
        create_invitation,
        pb::CreateInvitationRequest {
            rules: rules_of(&a.target)?,
            time_control: Some(time_control(a.base, a.increment, None)),
            invitee_id: bot.id.clone(),
            color: if a.black {
                pb::Color::Black
            } else {
                pb::Color::White
            } as i32,
            rated: false,
            fen: a.target.fen.clone(),
            expires_in_ms: 0,
        }
    )
    .map_err(status_error)?;
    let g = call!(
        bot_caller,
        games,
        accept_invitation,
        pb::InvitationRequest {
            invitation_id: invitation.invitation_id.clone(),
        }
    )
    .map_err(status_error)?;
    println!("game {}", g.game_id);
    let bot_color = if a.black { Color::White } else { Color::Black };
    let mut stdin = std::io::stdin().lock().lines();
    let action = pb::GameActionRequest {
        game_id: g.game_id.clone(),
    };
    loop {
        let view = call!(
            me,
            games,
            get_game,
            pb::GetGameRequest {
                game_id: g.game_id.clone(),
            }
        )
        .map_err(status_error)?;
        show(&view);
        if over(&view) {
            return Ok(());
        }
        let pos = variant_of(&view)?;
        let (caller, text) = if pos.side_to_move() == bot_color {
            let Some(mv) = bot_move(&pos) else {
                return Ok(());
            };
            let text = pos.move_to_text(&mv);
            println!("bot plays {text}");
            (&bot_caller, text)
        } else {
            let moves: Vec<String> = pos
                .legal_moves()
                .iter()
                .map(|m| pos.move_to_text(m))
                .collect();
            println!("your move ({}), or 'resign':", moves.join(" "));
            let Some(line) = stdin.next() else {
                // Nobody plays the bot once this process ends: end the game rather than leave it to
                // run out the clock.
                let ended = if view.moves.len() < 2 {
                    call!(me, games, abort, action.clone()).map(|_| "aborted")
                } else {
                    call!(me, games, resign, action.clone()).map(|_| "resigned")
                };
                let ended = ended.map_err(status_error)?;
                println!("end of input: the game against the bot is {ended}");
                return Ok(());
            };
            let line = line.map_err(|e| CliError(e.to_string()))?;
            if line.trim() == "resign" {
                call!(me, games, resign, action.clone()).map_err(status_error)?;
                continue;
            }
            (&me, line.trim().to_string())
        };
        let r = call!(
            caller,
            games,
            play_move,
            pb::PlayMoveRequest {
                game_id: g.game_id.clone(),
                r#move: Some(pb::MoveInput {
                    r#move: Some(pb::move_input::Move::Text(text)),
                }),
                expected_ply: Some(view.moves.len() as u32 + view.first_ply.saturating_sub(1)),
            }
        );
        if let Err(e) = r {
            println!("refused: {}", e.message());
        }
    }
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
            Some(Kind::Created(g)) => println!(
                "#{} created: {} vs {}",
                e.seq,
                g.white.map(|p| p.display_name).unwrap_or_default(),
                g.black.map(|p| p.display_name).unwrap_or_default()
            ),
            Some(Kind::MovePlayed(m)) => {
                let c = m.clocks.unwrap_or_default();
                println!(
                    "#{} ply {} {}  (white {:.1}s, black {:.1}s)",
                    e.seq,
                    m.ply,
                    m.r#move.map(|x| x.notation).unwrap_or_default(),
                    c.white_ms as f64 / 1000.0,
                    c.black_ms as f64 / 1000.0
                );
            }
            Some(Kind::DrawOffered(c)) => println!("#{} draw offered by {}", e.seq, color_name(c)),
            Some(Kind::DrawDeclined(c)) => {
                println!("#{} draw declined by {}", e.seq, color_name(c))
            }
            Some(Kind::Finished(s)) => println!("#{} {} ({})", e.seq, s.description, s.result),
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
