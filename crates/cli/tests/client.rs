//! The `draughts client` commands against a real server (the one-process platform, `draughtsd`'s
//! library, on 127.0.0.1:0 with in-memory backends): `--server HOST:PORT` without a scheme, the token
//! on every call (a whole game against the server's computer with an anonymous limit of 3 calls a minute:
//! polls without the token stopped such a game at ply 52 before), and what the end of input does.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;
use draughts_testkit::ServiceUnderTest;

async fn platform(anonymous_per_minute: u32) -> ServiceUnderTest {
    let limit = anonymous_per_minute.to_string();
    let config = draughtsd::Config::try_parse_from([
        "draughtsd",
        "--redis-url",
        "memory://",
        "--database-url",
        "sqlite::memory:",
        "--metrics-listen",
        "off",
        "--token-secret",
        "cli-test-only-token-secret-0123456789abcdef",
        "--rate-limit-anonymous-per-minute",
        &limit,
    ])
    .unwrap();
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

/// Runs `draughts client ARGS` (stdin closed); success, stdout, stderr.
async fn client(server: &ServiceUnderTest, args: &[&str]) -> (bool, String, String) {
    let mut command = draughts(server);
    command.arg("client").args(args).stdin(Stdio::null());
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_without_scheme_and_the_token_on_every_call() {
    let server = platform(2).await;
    let addr = server.addr().to_string();
    // `--server 127.0.0.1:PORT`, no scheme.
    let (ok, token, err) = client(&server, &["--server", &addr, "guest", "--name", "Ann"]).await;
    assert!(ok, "{err}");
    let token = token.trim().to_owned();
    // Far more calls than the anonymous limit allows: they carry the token, so they pass.
    for _ in 0..6 {
        let (ok, out, err) = client(
            &server,
            &["--token", &token, "moves", "--variant", "english"],
        )
        .await;
        assert!(ok, "{err}");
        assert!(out.contains("11-15"), "{out}");
    }
    server.stop().await;
}

/// A whole game against the server's computer (`ai:1`, moved by the platform's analysis workers), our
/// side played by answering each prompt with its first legal move, until ply 60 (then the input ends)
/// or the end of the game.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bot_game_runs_on_tokens_to_its_end_or_the_end_of_input() {
    let server = platform(3).await;
    let mut command = draughts(&server);
    command
        .args(["client", "bot", "--variant", "english", "--level", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let transcript = tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().unwrap();
        let mut stdin = Some(child.stdin.take().unwrap());
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut transcript = Vec::new();
        let mut ply = 0u32;
        for line in stdout.lines() {
            let line = line.unwrap();
            assert!(
                Instant::now() < deadline,
                "too slow:\n{}",
                transcript.join("\n")
            );
            if let Some(rest) = line.strip_prefix("ply ") {
                ply = rest.split_whitespace().next().unwrap().parse().unwrap();
            }
            if let Some(moves) = line
                .strip_prefix("your move (")
                .and_then(|rest| rest.split(')').next())
            {
                if ply >= 60 {
                    stdin = None;
                } else if let Some(input) = stdin.as_mut() {
                    let first = moves.split_whitespace().next().unwrap();
                    writeln!(input, "{first}").unwrap();
                }
            }
            transcript.push(line);
        }
        drop(stdin);
        let status = child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert!(status.success(), "{err}\n{}", transcript.join("\n"));
        (transcript, ply)
    })
    .await
    .unwrap();
    let (lines, ply) = transcript;
    let text = lines.join("\n");
    assert!(text.contains("against ai:1"), "{text}");
    let finished = lines
        .iter()
        .any(|l| l.starts_with("ply ") && (l.contains(" wins: ") || l.contains(" draw")));
    if ply >= 60 {
        assert!(
            text.contains("end of input: the game against the computer is resigned"),
            "{text}"
        );
    } else {
        // The game ended on the board first (the computer wins against first-listed moves well
        // before ply 60): every poll still went through, far past the anonymous limit of 3 calls.
        assert!(finished && ply > 20, "{text}");
    }
    server.stop().await;
}

/// `play` at the end of input leaves the game (it goes on, the clock runs) and says so; the game is
/// still ongoing afterwards. (Ann plays Black, who moves first in english.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn play_says_what_the_end_of_input_does() {
    let server = platform(10).await;
    let (ok, ann, err) = client(&server, &["guest", "--name", "Ann"]).await;
    assert!(ok, "{err}");
    let (ok, bob, err) = client(&server, &["guest", "--name", "Bob"]).await;
    assert!(ok, "{err}");
    let bob_id = err_id(&err);
    let ann = ann.trim().to_owned();
    let (ok, game, err) = client(
        &server,
        &[
            "--token",
            &ann,
            "create",
            "--variant",
            "english",
            "--opponent",
            &bob_id,
            "--black",
        ],
    )
    .await;
    assert!(ok, "{err}");
    let invitation = game.trim().to_owned();
    let (ok, game, err) = client(&server, &["--token", bob.trim(), "accept", &invitation]).await;
    assert!(ok, "{err}");
    let game = game.trim().to_owned();
    assert_eq!(game, invitation);
    let (ok, out, err) = client(&server, &["--token", &ann, "play", &game]).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("end of input: you left the game; it goes on and your clock runs"),
        "{out}"
    );
    let (ok, pdn, err) = client(&server, &["--token", &ann, "pdn", &game]).await;
    assert!(ok, "{err}");
    assert!(pdn.contains("[Result \"*\"]"), "the game goes on:\n{pdn}");
    server.stop().await;
}

/// The guest id `client guest` prints on stderr ("guest guest:... (export ...)").
fn err_id(stderr: &str) -> String {
    stderr
        .split_whitespace()
        .find(|w| w.starts_with("guest:"))
        .unwrap_or_default()
        .to_owned()
}

/// `seek` by two guests at once pairs them into one game; `lobby --pools` lists the pools; a lobby
/// offer is listed by `lobby` and started by the other's `accept`; `challenge` + `accept`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seek_lobby_challenge_and_accept() {
    let server = platform(10).await;
    let mut tokens = Vec::new();
    let mut ids = Vec::new();
    for name in ["Ann", "Bob", "Cy", "Di"] {
        let (ok, token, err) = client(&server, &["guest", "--name", name]).await;
        assert!(ok, "{err}");
        tokens.push(token.trim().to_owned());
        ids.push(err_id(&err));
    }
    let (ok, pools, err) = client(&server, &["--token", &tokens[0], "lobby", "--pools"]).await;
    assert!(ok, "{err}");
    assert!(pools.lines().any(|l| l == "english-3+2-casual"), "{pools}");
    let seek = |token: String| {
        let server_addr = server.addr().to_string();
        tokio::task::spawn_blocking(move || {
            let out = Command::new(env!("CARGO_BIN_EXE_draughts"))
                .env_remove("DRAUGHTS_TOKEN")
                .args(["client", "--server", &server_addr])
                .args(["--token", &token, "seek", "english-3+2-casual"])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).trim().to_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        })
    };
    let (a, b) = (seek(tokens[0].clone()), seek(tokens[1].clone()));
    let ((ok_a, game_a, err_a), (ok_b, game_b, err_b)) = (a.await.unwrap(), b.await.unwrap());
    assert!(ok_a && ok_b, "{err_a}\n{err_b}");
    assert_eq!(game_a, game_b);
    assert!(err_a.contains("paired in english-3+2-casual"), "{err_a}");
    // A lobby offer, listed, accepted by another player.
    let (ok, offer, err) = client(
        &server,
        &[
            "--token", &tokens[2], "lobby", "--offer", "-v", "russian", "--white",
        ],
    )
    .await;
    assert!(ok, "{err}");
    let offer = offer.trim().to_owned();
    let (ok, listing, err) = client(&server, &["--token", &tokens[3], "lobby"]).await;
    assert!(ok, "{err}");
    assert!(
        listing.contains(&offer) && listing.contains("RUSSIAN"),
        "{listing}"
    );
    assert!(listing.contains("games in progress"), "{listing}");
    let (ok, game, err) = client(&server, &["--token", &tokens[3], "accept", &offer]).await;
    assert!(ok, "{err}");
    assert_eq!(game.trim(), offer);
    // A challenge by id, accepted.
    let (ok, challenge, err) = client(
        &server,
        &[
            "--token",
            &tokens[0],
            "challenge",
            "-v",
            "english",
            "--opponent",
            &ids[2],
            "--days",
            "3",
        ],
    )
    .await;
    assert!(ok, "{err}");
    let (ok, game, err) = client(
        &server,
        &["--token", &tokens[2], "accept", challenge.trim()],
    )
    .await;
    assert!(ok, "{err}");
    assert_eq!(game.trim(), challenge.trim());
    server.stop().await;
}
