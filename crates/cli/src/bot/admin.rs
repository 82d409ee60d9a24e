//! `draughts client admin ...`: administrative calls about bots (needs an admin API key).
//!
//! `draughts client admin bot-limits <bot> [--games N] [--rate R/min]`: sets one bot's own limits
//! (`Auth.SetBotLimits`); a limit left out keeps its current value, `0` gives it back to the server's
//! default; without either flag the current limits are printed (`Auth.GetBotLimits`).

use clap::{Args, Subcommand};
use draughts_proto::pb;
use draughts_proto::pb::auth_client::AuthClient;
use tonic::transport::Channel;

use crate::CliError;
use crate::client::{Caller, call, status_error};

#[derive(Args, Debug)]
pub(crate) struct AdminArgs {
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Subcommand, Debug)]
enum AdminCommand {
    /// One bot's own limits: games at once and calls a minute (Auth.SetBotLimits / GetBotLimits).
    BotLimits(BotLimitsArgs),
}

#[derive(Args, Debug)]
struct BotLimitsArgs {
    /// The bot's player id: `key:<owner>` (an API key's bot) or `user:<id>` (an account made a bot).
    bot: String,
    /// Games going on at once (1 to 1000; 0 = the server's --max-open-games-per-bot).
    #[arg(long)]
    games: Option<u32>,
    /// Calls a minute with all the bot's credentials together: `R` or `R/min` (1 to 100000; 0 = each
    /// credential's own limit).
    #[arg(long, value_parser = parse_rate)]
    rate: Option<u32>,
}

/// `30` or `30/min`.
fn parse_rate(text: &str) -> Result<u32, String> {
    let number = text.trim().strip_suffix("/min").unwrap_or(text.trim());
    number
        .parse()
        .map_err(|_| format!("'{text}' is not a rate: a number of calls a minute, as 30 or 30/min"))
}

fn print(limits: &pb::BotLimits) {
    let or_default = |n: u32, default: &str| {
        if n == 0 {
            default.to_owned()
        } else {
            n.to_string()
        }
    };
    println!(
        "{}: games at once {}, calls a minute {}{}",
        limits.player_id,
        or_default(limits.max_games, "(the server's default for bots)"),
        or_default(limits.calls_per_minute, "(each credential's own limit)"),
        if limits.updated_at_ms == 0 {
            " (never set)".to_owned()
        } else {
            format!(" (set at {} ms)", limits.updated_at_ms)
        }
    );
}

pub(crate) async fn run(ch: &Channel, caller: &Caller, a: AdminArgs) -> Result<(), CliError> {
    let auth = AuthClient::new(ch.clone());
    match a.command {
        AdminCommand::BotLimits(l) => {
            let current = call!(
                caller,
                auth,
                get_bot_limits,
                pb::GetBotLimitsRequest {
                    player_id: l.bot.clone()
                }
            )
            .map_err(status_error)?;
            if l.games.is_none() && l.rate.is_none() {
                print(&current);
                return Ok(());
            }
            let set = call!(
                caller,
                auth,
                set_bot_limits,
                pb::SetBotLimitsRequest {
                    player_id: l.bot.clone(),
                    max_games: l.games.unwrap_or(current.max_games),
                    calls_per_minute: l.rate.unwrap_or(current.calls_per_minute),
                }
            )
            .map_err(status_error)?;
            print(&set);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("30"), Ok(30));
        assert_eq!(parse_rate("30/min"), Ok(30));
        assert_eq!(parse_rate(" 0/min "), Ok(0));
        assert!(parse_rate("30/s").is_err());
        assert!(parse_rate("-1").is_err());
    }
}
