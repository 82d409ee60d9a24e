//! `draughts client signup|signin|signout|whoami` against the one-process platform: the session saved
//! in the config directory (private to its owner), used and refreshed by later commands, and a clear
//! message once the server no longer knows it.

use std::io::Write;
use std::process::{Command, Stdio};

use clap::Parser;
use draughts_proto::pb;
use draughts_testkit::ServiceUnderTest;

async fn platform() -> ServiceUnderTest {
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
        // Shorter than the client's refresh margin: every command refreshes (and rotates) first.
        "--access-token-ttl-secs",
        "60",
    ])
    .unwrap();
    ServiceUnderTest::start(move |listener, shutdown| draughtsd::run(config, listener, shutdown))
        .await
}

/// Runs `draughts client ARGS` with `stdin` as its input; success, stdout, stderr.
async fn client(
    server: &ServiceUnderTest,
    config_dir: &std::path::Path,
    args: &[&str],
    stdin: &str,
) -> (bool, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_draughts"));
    command
        .env_remove("DRAUGHTS_TOKEN")
        .env("DRAUGHTS_SERVER", server.addr().to_string())
        .env("DRAUGHTS_CONFIG_DIR", config_dir)
        .arg("client")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let input = stdin.to_owned();
    let out = tokio::task::spawn_blocking(move || {
        let mut child = command.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_kept_refreshed_and_ended() {
    let server = platform().await;
    let tmp = tempfile::Builder::new()
        .prefix("draughts-cli-session-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();

    // A guest signs up and becomes the account.
    let (ok, guest_token, err) = client(&server, dir, &["guest", "--name", "Cli"], "").await;
    assert!(ok, "{err}");
    let (ok, out, err) = client(
        &server,
        dir,
        &[
            "--token",
            guest_token.trim(),
            "signup",
            "--username",
            "cli_user",
            "--password-stdin",
        ],
        "a long password\n",
    )
    .await;
    assert!(ok, "{err}");
    assert!(out.contains("signed up as cli_user (user:"), "{out}");
    assert!(out.contains("guest:"), "{out}");
    let file = dir.join("sessions.json");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{mode:o}");
    }
    let saved = std::fs::read_to_string(&file).unwrap();
    assert!(!saved.contains("a long password"));

    // Later commands use the session, refreshing it (the refresh token rotates in the file).
    let (ok, out, err) = client(&server, dir, &["whoami"], "").await;
    assert!(ok, "{err}");
    assert!(
        out.contains("cli_user (user:") && out.contains("ACCOUNT"),
        "{out}"
    );
    let rotated = std::fs::read_to_string(&file).unwrap();
    assert_ne!(saved, rotated, "the refresh token rotated");
    let (ok, out, err) = client(&server, dir, &["whoami"], "").await;
    assert!(ok && out.contains("cli_user"), "{out} {err}");

    // The block list, with the saved session.
    let (ok, out, err) = client(&server, dir, &["block", "ai:1"], "").await;
    assert!(!ok && err.contains("InvalidArgument"), "{out} {err}");
    let (ok, other, err) = client(&server, dir, &["guest", "--name", "Pest"], "").await;
    assert!(ok, "{err}");
    let pest = {
        let (ok, out, err) = client(&server, dir, &["--token", other.trim(), "whoami"], "").await;
        assert!(ok, "{err}");
        let open = out.find("(guest:").unwrap();
        out[open + 1..out.find("),").unwrap()].to_owned()
    };
    let (ok, out, err) = client(&server, dir, &["block", &pest], "").await;
    assert!(ok && out.contains("1 blocked"), "{out} {err}");
    let (ok, out, _) = client(&server, dir, &["blocked"], "").await;
    assert!(ok && out.trim() == pest, "{out}");
    let (ok, out, _) = client(&server, dir, &["unblock", &pest], "").await;
    assert!(ok && out.contains("0 blocked"), "{out}");

    // Signed out: the file forgets it and calls are anonymous again.
    let (ok, out, _) = client(&server, dir, &["signout"], "").await;
    assert!(ok && out.contains("signed out"), "{out}");
    let (ok, _, err) = client(&server, dir, &["whoami"], "").await;
    assert!(!ok && err.contains("Unauthenticated"), "{err}");

    // Signed in again; then the server ends the session (a password change elsewhere): the next
    // command says so clearly and forgets the session.
    let (ok, out, err) = client(
        &server,
        dir,
        &["signin", "-u", "CLI_user", "--password-stdin"],
        "a long password\n",
    )
    .await;
    assert!(ok && out.contains("signed in as cli_user"), "{out} {err}");
    let channel = server.channel().await;
    let mut auth = pb::auth_client::AuthClient::new(channel);
    let other = auth
        .sign_in(pb::SignInRequest {
            username: "cli_user".into(),
            password: "a long password".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut req = tonic::Request::new(pb::ChangePasswordRequest {
        current_password: "a long password".into(),
        new_password: "another long one".into(),
    });
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {}", other.access_token).parse().unwrap(),
    );
    auth.change_password(req).await.unwrap();
    let (ok, _, err) = client(&server, dir, &["whoami"], "").await;
    assert!(
        !ok && err.contains("session") && err.contains("signin"),
        "{err}"
    );
    assert!(!std::fs::read_to_string(&file).unwrap().contains("cli_user"));
    // A wrong password: a clear refusal, nothing saved.
    let (ok, _, err) = client(
        &server,
        dir,
        &["signin", "-u", "cli_user", "--password-stdin"],
        "a long password\n",
    )
    .await;
    assert!(!ok && err.contains("wrong username or password"), "{err}");
    server.stop().await;
}
