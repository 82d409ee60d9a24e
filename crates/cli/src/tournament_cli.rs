//! `draughts client tournament create|list|join|leave|watch|show|start`: the Tournaments service.

use clap::{Args, Subcommand};
use draughts_proto::pb;
use draughts_proto::pb::tournaments_client::TournamentsClient;
use tonic::transport::Channel;

use crate::CliError;
use crate::client::{Caller, Target, call, rules_of, status_error};

#[derive(Args, Debug)]
pub struct TournamentArgs {
    #[command(subcommand)]
    command: TournamentCommand,
}

#[derive(Subcommand, Debug)]
enum TournamentCommand {
    /// Tournaments.CreateTournament (a signed-in account or an admin key); prints the id.
    Create(CreateArgs),
    /// Tournaments.ListTournaments: one page of upcoming, running or finished events.
    List {
        /// upcoming, running or finished.
        #[arg(long, default_value = "upcoming")]
        state: String,
        #[arg(long, default_value_t = 20)]
        size: u32,
        /// The page token printed at the end of the previous page.
        #[arg(long, default_value = "")]
        page: String,
    },
    /// Tournaments.JoinTournament (again after leaving: back in).
    Join {
        tournament_id: String,
        /// A private event's password.
        #[arg(long, default_value = "")]
        password: String,
    },
    /// Tournaments.LeaveTournament: a pause in an arena, a withdrawal from a Swiss event.
    Leave { tournament_id: String },
    /// Tournaments.StartTournament: start your Swiss event now.
    Start { tournament_id: String },
    /// Tournaments.GetTournament: the terms, standings (one page) and games in progress.
    Show {
        tournament_id: String,
        #[arg(long, default_value_t = 50)]
        size: u32,
    },
    /// Tournaments.WatchTournament: print every event until the end.
    Watch { tournament_id: String },
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    /// The title.
    #[arg(long)]
    name: String,
    /// A Swiss event of this many rounds (default: an arena).
    #[arg(long, conflicts_with = "minutes")]
    rounds: Option<u32>,
    /// An arena of this many minutes.
    #[arg(long, default_value_t = 30)]
    minutes: u32,
    #[command(flatten)]
    target: Target,
    /// Fischer base time, seconds.
    #[arg(long, default_value_t = 180)]
    base: u64,
    /// Fischer increment, seconds.
    #[arg(long, default_value_t = 2)]
    increment: u64,
    #[arg(long)]
    rated: bool,
    /// Starts in this many seconds.
    #[arg(long, default_value_t = 60)]
    start_in: u32,
    /// Swiss: seconds between round starts (default: each round when the previous one ends).
    #[arg(long)]
    interval: Option<u32>,
    /// Lowest rating allowed to enter.
    #[arg(long, default_value_t = 0)]
    min_rating: u32,
    /// Highest rating allowed to enter.
    #[arg(long, default_value_t = 0)]
    max_rating: u32,
    /// Only signed-in accounts may enter.
    #[arg(long)]
    accounts_only: bool,
    /// Most entrants (0: the server's bound).
    #[arg(long, default_value_t = 0)]
    max_players: u32,
    /// A private event's password.
    #[arg(long, default_value = "")]
    password: String,
    /// An arena without berserk (players may not halve their clock for an extra point).
    #[arg(long)]
    no_berserk: bool,
}

fn state_name(state: i32) -> &'static str {
    pb::TournamentState::try_from(state)
        .map(|s| s.as_str_name())
        .unwrap_or("UNKNOWN")
        .trim_start_matches("TOURNAMENT_STATE_")
}

fn name(p: &Option<pb::Player>) -> String {
    p.as_ref()
        .map(|p| {
            if p.display_name.is_empty() {
                p.id.clone()
            } else {
                p.display_name.clone()
            }
        })
        .unwrap_or_default()
}

fn header(t: &pb::Tournament) -> String {
    let terms = t.terms.clone().unwrap_or_default();
    let kind = if terms.kind == pb::TournamentKind::Swiss as i32 {
        format!("Swiss, {} rounds", terms.swiss_rounds)
    } else {
        format!("arena, {} min", terms.arena_duration_seconds / 60)
    };
    format!(
        "{}  {}  [{kind}]  {}  {} players{}",
        t.tournament_id,
        terms.name,
        state_name(t.state),
        t.players,
        if t.has_password { "  (private)" } else { "" }
    )
}

fn print_rows(rows: &[pb::StandingRow]) -> Result<(), CliError> {
    for r in rows {
        let mut flags = String::new();
        if r.on_fire {
            flags.push_str(" on-fire");
        }
        if r.paused {
            flags.push_str(" paused");
        }
        if r.withdrawn {
            flags.push_str(" withdrawn");
        }
        out!(
            "{:>4}. {:<24} {:>5} pts  {:>3} games  {:>4} rated  {}{}",
            r.rank,
            name(&r.player),
            r.points,
            r.games,
            r.rating,
            r.sheet,
            flags
        );
    }
    Ok(())
}

pub async fn run(ch: &Channel, caller: &Caller, a: TournamentArgs) -> Result<(), CliError> {
    let client = TournamentsClient::new(ch.clone());
    match a.command {
        TournamentCommand::Create(c) => {
            let (kind, arena_duration_seconds, swiss_rounds) = match c.rounds {
                Some(rounds) => (pb::TournamentKind::Swiss, 0, rounds),
                None => (pb::TournamentKind::Arena, c.minutes * 60, 0),
            };
            let terms = pb::TournamentTerms {
                name: c.name.clone(),
                kind: kind as i32,
                rules: rules_of(&c.target)?,
                time_control: Some(pb::TimeControl {
                    kind: Some(pb::time_control::Kind::Fischer(pb::Fischer {
                        base_ms: c.base * 1000,
                        increment_ms: c.increment * 1000,
                    })),
                }),
                rated: c.rated,
                start: Some(pb::tournament_terms::Start::StartInSeconds(c.start_in)),
                arena_duration_seconds,
                swiss_rounds,
                round_start: match c.interval {
                    Some(_) => pb::SwissRoundStart::FixedInterval as i32,
                    None => 0,
                },
                round_interval_seconds: c.interval.unwrap_or(0),
                conditions: Some(pb::EntryConditions {
                    min_rating: c.min_rating,
                    max_rating: c.max_rating,
                    accounts_only: c.accounts_only,
                    max_players: c.max_players,
                    password: c.password.clone(),
                }),
                berserk_allowed: c.no_berserk.then_some(false),
            };
            let t = call!(
                caller,
                client,
                create_tournament,
                pb::CreateTournamentRequest { terms: Some(terms) }
            )
            .map_err(status_error)?;
            eprintln!("{}", header(&t));
            out!("{}", t.tournament_id);
        }
        TournamentCommand::List { state, size, page } => {
            let state = match state.as_str() {
                "upcoming" => pb::TournamentState::Upcoming,
                "running" => pb::TournamentState::Running,
                "finished" => pb::TournamentState::Finished,
                other => {
                    return Err(CliError(format!(
                        "--state {other:?}: upcoming, running or finished"
                    )));
                }
            };
            let r = call!(
                caller,
                client,
                list_tournaments,
                pb::ListTournamentsRequest {
                    state: state as i32,
                    page_size: size,
                    page_token: page.clone(),
                }
            )
            .map_err(status_error)?;
            for t in &r.tournaments {
                out!("{}", header(t));
            }
            if !r.next_page_token.is_empty() {
                eprintln!("more: --page {}", r.next_page_token);
            }
        }
        TournamentCommand::Join {
            tournament_id,
            password,
        } => {
            let t = call!(
                caller,
                client,
                join_tournament,
                pb::JoinTournamentRequest {
                    tournament_id: tournament_id.clone(),
                    password: password.clone(),
                }
            )
            .map_err(status_error)?;
            out!("{}", header(&t));
        }
        TournamentCommand::Leave { tournament_id } => {
            let t = call!(
                caller,
                client,
                leave_tournament,
                pb::LeaveTournamentRequest {
                    tournament_id: tournament_id.clone()
                }
            )
            .map_err(status_error)?;
            out!("{}", header(&t));
        }
        TournamentCommand::Start { tournament_id } => {
            let t = call!(
                caller,
                client,
                start_tournament,
                pb::StartTournamentRequest {
                    tournament_id: tournament_id.clone()
                }
            )
            .map_err(status_error)?;
            out!("{}", header(&t));
        }
        TournamentCommand::Show {
            tournament_id,
            size,
        } => {
            let v = call!(
                caller,
                client,
                get_tournament,
                pb::GetTournamentRequest {
                    tournament_id: tournament_id.clone(),
                    standings_page_size: size,
                    standings_page_token: String::new(),
                }
            )
            .map_err(status_error)?;
            if let Some(t) = &v.tournament {
                out!("{}", header(t));
            }
            print_rows(&v.standings)?;
            for p in &v.pairings {
                out!(
                    "game {}: {} - {}",
                    p.game_id,
                    name(&p.white),
                    name(&p.black)
                );
            }
        }
        TournamentCommand::Watch { tournament_id } => {
            let mut stream = call!(
                caller,
                client,
                watch_tournament,
                pb::WatchTournamentRequest {
                    tournament_id: tournament_id.clone()
                }
            )
            .map_err(status_error)?;
            use pb::tournament_event::Kind;
            while let Some(event) = stream.message().await.map_err(status_error)? {
                match event.kind {
                    Some(Kind::Snapshot(t)) => out!("{}", header(&t)),
                    Some(Kind::Joined(p)) => out!("joined: {}", name(&Some(p))),
                    Some(Kind::Left(p)) => out!("left: {}", name(&Some(p))),
                    Some(Kind::Paired(p)) => out!(
                        "game {}: {} - {}",
                        p.game_id,
                        name(&p.white),
                        name(&p.black)
                    ),
                    Some(Kind::Result(r)) => {
                        let outcome = pb::Outcome::try_from(r.outcome)
                            .map(|o| o.as_str_name())
                            .unwrap_or("UNKNOWN");
                        out!(
                            "result {}: {} - {}: {outcome}{}",
                            r.game_id,
                            name(&r.white),
                            name(&r.black),
                            if r.forfeit { " (forfeit)" } else { "" }
                        );
                    }
                    Some(Kind::Standings(s)) => {
                        out!("standings:");
                        print_rows(&s.rows)?;
                    }
                    Some(Kind::RoundStarted(r)) => match r.bye {
                        Some(bye) => out!("round {} (bye: {})", r.round, name(&Some(bye))),
                        None => out!("round {}", r.round),
                    },
                    Some(Kind::Finished(t)) => {
                        out!("finished: {}", header(&t));
                        return Ok(());
                    }
                    None => {}
                }
            }
        }
    }
    Ok(())
}
