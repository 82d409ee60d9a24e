//! `draughts client tournament create|list|show|join|watch|leave|start` against the real one-process
//! platform (`draughtsd`'s library on 127.0.0.1:0, in-memory backends): each subcommand run as the
//! `draughts` binary, its output and exit code checked.
//!
//! - `tournament_commands_from_the_terminal`: a guest's `create` is refused with the server's reason
//!   (exit 1), a signed-up account's creates a Swiss event (its id on stdout), bad terms are refused
//!   naming the field; `list` shows it upcoming, `watch` prints the snapshot then both joins (read
//!   with a deadline), `join` by two guests, `show` lists them; `start` by someone else is refused, by
//!   the creator starts round 1, whose pairing `watch` and `show` print; `leave` withdraws a player.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use draughts_proto::pb;
use draughts_testkit::ServiceUnderTest;

async fn platform() -> ServiceUnderTest {
    let mut config = draughtsd::Config::for_tests("memory://", "sqlite::memory:");
    config.auth.rate_limit_guest_per_minute = 1_000_000;
    ServiceUnderTest::start(move |listener, shutdown| draughtsd::run(config, listener, shutdown))
        .await
}

fn draughts(server: &ServiceUnderTest) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_draughts"));
    command
        .env_remove("DRAUGHTS_TOKEN")
        .env("DRAUGHTS_SERVER", server.addr().to_string());
    command
}

/// What one run of the binary gave.
#[derive(Debug)]
struct Run {
    code: Option<i32>,
    out: String,
    err: String,
}

/// Runs `draughts client [--token TOKEN] ARGS` (stdin closed).
async fn client(server: &ServiceUnderTest, token: Option<&str>, args: &[&str]) -> Run {
    let mut command = draughts(server);
    command.arg("client");
    if let Some(token) = token {
        command.args(["--token", token]);
    }
    command.args(args).stdin(Stdio::null());
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    Run {
        code: out.status.code(),
        out: String::from_utf8_lossy(&out.stdout).into_owned(),
        err: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[track_caller]
fn succeeded(run: &Run) {
    assert_eq!(run.code, Some(0), "{run:?}");
}

/// `draughts client guest --name NAME`: its token.
async fn guest(server: &ServiceUnderTest, name: &str) -> String {
    let run = client(server, None, &["guest", "--name", name]).await;
    succeeded(&run);
    run.out.trim().to_owned()
}

/// A signed-up account's access token.
async fn account(server: &ServiceUnderTest, username: &str) -> String {
    pb::auth_client::AuthClient::new(server.channel().await)
        .sign_up(pb::SignUpRequest {
            username: username.into(),
            password: "correct horse battery".into(),
            display_name: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .access_token
}

/// `draughts client tournament watch ID` running, its stdout read line by line on a thread.
struct Watcher {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Watcher {
    fn start(server: &ServiceUnderTest, id: &str) -> Watcher {
        let mut child = draughts(server)
            .args(["client", "tournament", "watch", id])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watcher {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Reads lines until one satisfies `found`; panics (with every line read) after `limit` or when
    /// the watch ends first.
    async fn until(&mut self, what: &str, limit: Duration, found: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        loop {
            match self.lines.try_recv() {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if found(&line) {
                        return line;
                    }
                }
                Err(mpsc::TryRecvError::Empty) => {
                    assert!(
                        Instant::now() < deadline,
                        "watch: no {what} within {limit:?}; read: {:#?}",
                        self.seen
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(mpsc::TryRecvError::Disconnected) => {
                    panic!("watch ended before {what}; read: {:#?}", self.seen)
                }
            }
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tournament_commands_from_the_terminal() {
    let server = platform().await;
    let create = |name: &'static str, extra: &'static [&'static str]| {
        let mut args = vec![
            "tournament",
            "create",
            "--name",
            name,
            "-v",
            "english",
            "--base",
            "60",
            "--increment",
            "1",
            "--start-in",
            "600",
        ];
        args.extend_from_slice(extra);
        args
    };

    // A guest may not create one: the server's reason, exit code 1, nothing on stdout.
    let ann = guest(&server, "Ann").await;
    let refused = client(
        &server,
        Some(&ann),
        &create("Guest cup", &["--rounds", "1"]),
    )
    .await;
    assert_eq!(refused.code, Some(1), "{refused:?}");
    assert!(refused.out.is_empty(), "{refused:?}");
    assert!(
        refused.err.contains("PermissionDenied")
            && refused
                .err
                .contains("only signed-in accounts (not guests) and admins may create tournaments"),
        "{refused:?}"
    );
    // Nor may an anonymous caller.
    let anonymous = client(&server, None, &create("Nobody's cup", &["--rounds", "1"])).await;
    assert_eq!(anonymous.code, Some(1), "{anonymous:?}");
    assert!(anonymous.out.is_empty(), "{anonymous:?}");

    // A signed-up account may; bad terms are refused naming the field.
    let organiser = account(&server, "organiser").await;
    let zero = client(
        &server,
        Some(&organiser),
        &create("Zero arena", &["--minutes", "0"]),
    )
    .await;
    assert_eq!(zero.code, Some(1), "{zero:?}");
    assert!(
        zero.err.contains("InvalidArgument") && zero.err.contains("arena_duration_seconds"),
        "{zero:?}"
    );
    let made = client(
        &server,
        Some(&organiser),
        &create("Sunday Swiss", &["--rounds", "1"]),
    )
    .await;
    succeeded(&made);
    let id = made.out.trim().to_owned();
    assert!(
        !id.is_empty() && !id.contains(char::is_whitespace),
        "{made:?}"
    );
    // The header on stderr: id, name, kind, state, players.
    assert!(
        made.err.contains(&id)
            && made.err.contains("Sunday Swiss")
            && made.err.contains("[Swiss, 1 rounds]")
            && made.err.contains("UPCOMING")
            && made.err.contains("0 players"),
        "{made:?}"
    );

    // Listed among the upcoming events, not among the running ones; a bad state is refused.
    let upcoming = client(&server, None, &["tournament", "list"]).await;
    succeeded(&upcoming);
    let line = upcoming
        .out
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} not listed: {upcoming:?}"));
    assert!(
        line.contains("Sunday Swiss") && line.contains("UPCOMING"),
        "{line}"
    );
    let running = client(&server, None, &["tournament", "list", "--state", "running"]).await;
    succeeded(&running);
    assert!(!running.out.contains(&id), "{running:?}");
    let bad_state = client(&server, None, &["tournament", "list", "--state", "soon"]).await;
    assert_eq!(bad_state.code, Some(1), "{bad_state:?}");
    assert!(
        bad_state.err.contains("upcoming, running or finished"),
        "{bad_state:?}"
    );

    // A watcher (anonymous) sees the snapshot, then each join.
    let mut watcher = Watcher::start(&server, &id);
    let limit = Duration::from_secs(20);
    let snapshot = watcher
        .until("snapshot", limit, |l| l.starts_with(&id))
        .await;
    assert!(snapshot.contains("Sunday Swiss"), "{snapshot}");

    // Two players join; each answer is the event's header with the new count.
    let bob = guest(&server, "Bob").await;
    for (token, players) in [(&ann, "1 players"), (&bob, "2 players")] {
        let joined = client(&server, Some(token), &["tournament", "join", &id]).await;
        succeeded(&joined);
        assert!(
            joined.out.starts_with(&id) && joined.out.contains(players),
            "{joined:?}"
        );
    }
    for name in ["Ann", "Bob"] {
        watcher
            .until(&format!("{name}'s join"), limit, |l| {
                l == format!("joined: {name}")
            })
            .await;
    }
    // Joining an unknown event: NOT_FOUND, exit code 1.
    let unknown = client(
        &server,
        Some(&ann),
        &["tournament", "join", "t-no-such-event"],
    )
    .await;
    assert_eq!(unknown.code, Some(1), "{unknown:?}");
    assert!(unknown.err.starts_with("error: "), "{unknown:?}");

    // `show`: the header and both players in the standings.
    let shown = client(&server, None, &["tournament", "show", &id]).await;
    succeeded(&shown);
    let mut lines = shown.out.lines();
    let header = lines.next().unwrap_or_default();
    assert!(
        header.starts_with(&id) && header.contains("2 players"),
        "{shown:?}"
    );
    let rows: Vec<&str> = lines.collect();
    for name in ["Ann", "Bob"] {
        assert!(
            rows.iter().any(|r| r.contains(name) && r.contains("pts")),
            "{name} not in the standings: {shown:?}"
        );
    }

    // `start`: only the creator may start it early; then round 1 pairs the two players.
    let not_yours = client(&server, Some(&bob), &["tournament", "start", &id]).await;
    assert_eq!(not_yours.code, Some(1), "{not_yours:?}");
    assert!(not_yours.out.is_empty(), "{not_yours:?}");
    let started = client(&server, Some(&organiser), &["tournament", "start", &id]).await;
    succeeded(&started);
    assert!(started.out.starts_with(&id), "{started:?}");
    let pairing = watcher
        .until("round 1's pairing", limit, |l| l.starts_with("game "))
        .await;
    assert!(
        pairing.contains("Ann") && pairing.contains("Bob"),
        "{pairing}"
    );
    assert!(
        watcher.seen.iter().any(|l| l == "round 1"),
        "{:#?}",
        watcher.seen
    );
    let game_id = pairing
        .strip_prefix("game ")
        .and_then(|rest| rest.split(':').next())
        .unwrap()
        .to_owned();
    let shown = client(&server, None, &["tournament", "show", &id]).await;
    succeeded(&shown);
    assert!(shown.out.contains("RUNNING"), "{shown:?}");
    assert!(
        shown
            .out
            .lines()
            .any(|l| l.starts_with(&format!("game {game_id}:"))),
        "{shown:?}"
    );

    // `leave`: a withdrawal from a Swiss event, marked in the standings.
    let left = client(&server, Some(&bob), &["tournament", "leave", &id]).await;
    succeeded(&left);
    assert!(left.out.starts_with(&id), "{left:?}");
    watcher
        .until("Bob's leaving", limit, |l| l == "left: Bob")
        .await;
    let shown = client(&server, None, &["tournament", "show", &id]).await;
    succeeded(&shown);
    assert!(
        shown
            .out
            .lines()
            .any(|l| l.contains("Bob") && l.contains("withdrawn")),
        "{shown:?}"
    );
    drop(watcher);
    server.stop().await;
}
