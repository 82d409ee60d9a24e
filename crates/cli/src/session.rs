//! `draughts client signup|signin|signout|whoami`: an account's session kept in the user's config
//! directory (`$DRAUGHTS_CONFIG_DIR`, else the platform's config directory + `draughts`, e.g.
//! `~/.config/draughts` on Linux), in `sessions.json`, one session per server, readable by its owner
//! only. Every other `draughts client` command without `--token` uses the saved session of its
//! server, refreshing the access token when it is about to expire (the refresh token rotates, so the
//! file is rewritten each time). A session the server no longer knows (signed out elsewhere, password
//! changed, account deleted, refresh token reused) is removed with a message saying to sign in again.

use std::collections::BTreeMap;
use std::io::{BufRead, IsTerminal};
use std::path::PathBuf;

use clap::Args;
use draughts_proto::pb;
use draughts_proto::pb::auth_client::AuthClient;
use serde::{Deserialize, Serialize};
use tonic::transport::Channel;

use crate::CliError;

/// Refresh an access token this long before it expires.
const REFRESH_MARGIN_MS: u64 = 60_000;

/// A saved session.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Saved {
    pub(crate) username: String,
    pub(crate) player_id: String,
    pub(crate) access_token: String,
    pub(crate) access_expires_at_ms: u64,
    pub(crate) refresh_token: String,
    pub(crate) refresh_expires_at_ms: u64,
}

/// The sessions file: server URL -> session.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Sessions {
    v: u32,
    #[serde(default)]
    servers: BTreeMap<String, Saved>,
}

#[derive(Args, Debug)]
pub(crate) struct SignUpArgs {
    /// 3 to 20 ASCII letters, digits, '_' or '-', starting with a letter.
    #[arg(long, short = 'u')]
    username: String,
    /// The name shown to others (default: the username).
    #[arg(long, default_value = "")]
    display_name: String,
    /// Read the password from the first line of standard input instead of asking for it.
    #[arg(long)]
    password_stdin: bool,
}

#[derive(Args, Debug)]
pub(crate) struct SignInArgs {
    #[arg(long, short = 'u')]
    username: String,
    /// Read the password from the first line of standard input instead of asking for it.
    #[arg(long)]
    password_stdin: bool,
}

fn config_dir() -> Result<PathBuf, CliError> {
    if let Some(dir) = std::env::var_os("DRAUGHTS_CONFIG_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    dirs::config_dir()
        .map(|d| d.join("draughts"))
        .ok_or_else(|| CliError("no config directory: set DRAUGHTS_CONFIG_DIR".into()))
}

fn sessions_file() -> Result<PathBuf, CliError> {
    Ok(config_dir()?.join("sessions.json"))
}

fn load() -> Result<Sessions, CliError> {
    let file = sessions_file()?;
    match std::fs::read(&file) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map_err(|e| CliError(format!("{}: not a sessions file ({e})", file.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Sessions {
            v: 1,
            servers: BTreeMap::new(),
        }),
        Err(e) => Err(CliError(format!("{}: {e}", file.display()))),
    }
}

/// Writes the file readable by its owner only (a new file renamed over the old one).
fn store(sessions: &Sessions) -> Result<(), CliError> {
    let file = sessions_file()?;
    let dir = file.parent().map(PathBuf::from).unwrap_or_default();
    std::fs::create_dir_all(&dir).map_err(|e| CliError(format!("{}: {e}", dir.display())))?;
    let tmp = file.with_extension("json.tmp");
    let bytes = serde_json::to_vec_pretty(sessions).map_err(|e| CliError(e.to_string()))?;
    {
        use std::io::Write;
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut out = options
            .open(&tmp)
            .map_err(|e| CliError(format!("{}: {e}", tmp.display())))?;
        out.write_all(&bytes)
            .map_err(|e| CliError(format!("{}: {e}", tmp.display())))?;
    }
    std::fs::rename(&tmp, &file).map_err(|e| CliError(format!("{}: {e}", file.display())))
}

fn save(server: &str, session: &pb::Session) -> Result<(), CliError> {
    let mut sessions = load()?;
    sessions.v = 1;
    sessions.servers.insert(
        server.to_owned(),
        Saved {
            username: session.username.clone(),
            player_id: session
                .player
                .as_ref()
                .map(|p| p.id.clone())
                .unwrap_or_default(),
            access_token: session.access_token.clone(),
            access_expires_at_ms: session.access_expires_at_ms,
            refresh_token: session.refresh_token.clone(),
            refresh_expires_at_ms: session.refresh_expires_at_ms,
        },
    );
    store(&sessions)
}

fn forget(server: &str) -> Result<Option<Saved>, CliError> {
    let mut sessions = load()?;
    let removed = sessions.servers.remove(server);
    if removed.is_some() {
        store(&sessions)?;
    }
    Ok(removed)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn read_password(from_stdin: bool, prompt: &str) -> Result<String, CliError> {
    let password = if from_stdin || !std::io::stdin().is_terminal() {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| CliError(format!("reading the password: {e}")))?;
        line.trim_end_matches(['\n', '\r']).to_owned()
    } else {
        rpassword::prompt_password(prompt)
            .map_err(|e| CliError(format!("reading the password: {e}")))?
    };
    if password.is_empty() {
        return Err(CliError("no password given".into()));
    }
    Ok(password)
}

fn ended(server: &str) -> CliError {
    CliError(format!(
        "your session on {server} has ended (signed out elsewhere, password changed, account deleted, or the server no longer knows it): run `draughts client signin`"
    ))
}

/// The token for a call to `server`: the saved session's access token, refreshed first when it is
/// about to expire; `None` without a saved session.
pub(crate) async fn token_for(channel: &Channel, server: &str) -> Result<Option<String>, CliError> {
    let Some(saved) = load()?.servers.get(server).cloned() else {
        return Ok(None);
    };
    if now_ms() + REFRESH_MARGIN_MS < saved.access_expires_at_ms {
        return Ok(Some(saved.access_token));
    }
    let mut auth = AuthClient::new(channel.clone());
    match auth
        .refresh_session(pb::RefreshSessionRequest {
            refresh_token: saved.refresh_token.clone(),
        })
        .await
    {
        Ok(session) => {
            let session = session.into_inner();
            save(server, &session)?;
            Ok(Some(session.access_token))
        }
        Err(e) if e.code() == tonic::Code::Unauthenticated => {
            forget(server)?;
            Err(ended(server))
        }
        Err(e) => Err(crate::client::status_error(e)),
    }
}

/// Whether `server` has a saved session (a refused call then means it ended).
pub(crate) fn has_session(server: &str) -> bool {
    load().is_ok_and(|s| s.servers.contains_key(server))
}

/// The message for a call refused with UNAUTHENTICATED (`message`) while using the saved session.
pub(crate) fn session_refused(server: &str, message: &str) -> CliError {
    let _ = forget(server);
    CliError(format!("{} ({message})", ended(server).0))
}

pub(crate) async fn sign_up(
    channel: &Channel,
    server: &str,
    guest_token: Option<&str>,
    args: SignUpArgs,
) -> Result<(), CliError> {
    let password = read_password(args.password_stdin, "password: ")?;
    let mut req = tonic::Request::new(pb::SignUpRequest {
        username: args.username,
        password,
        display_name: args.display_name,
    });
    if let Some(token) = guest_token {
        req.metadata_mut().insert(
            "authorization",
            format!("Bearer {token}")
                .parse()
                .map_err(|_| CliError("the token has characters that can't be sent".into()))?,
        );
    }
    let session = AuthClient::new(channel.clone())
        .sign_up(req)
        .await
        .map_err(crate::client::status_error)?
        .into_inner();
    save(server, &session)?;
    let id = session.player.as_ref().map_or("", |p| p.id.as_str());
    out!("signed up as {} ({id})", session.username);
    if !session.adopted_guest_id.is_empty() {
        out!(
            "the guest {} is now this account: its games and ratings are yours",
            session.adopted_guest_id
        );
    }
    Ok(())
}

pub(crate) async fn sign_in(
    channel: &Channel,
    server: &str,
    args: SignInArgs,
) -> Result<(), CliError> {
    let password = read_password(args.password_stdin, "password: ")?;
    let session = AuthClient::new(channel.clone())
        .sign_in(pb::SignInRequest {
            username: args.username,
            password,
        })
        .await
        .map_err(crate::client::status_error)?
        .into_inner();
    save(server, &session)?;
    let id = session.player.as_ref().map_or("", |p| p.id.as_str());
    out!("signed in as {} ({id})", session.username);
    Ok(())
}

pub(crate) async fn sign_out(channel: &Channel, server: &str) -> Result<(), CliError> {
    let Some(saved) = forget(server)? else {
        out!("not signed in on {server}");
        return Ok(());
    };
    // The local session is gone whatever the server answers.
    match AuthClient::new(channel.clone())
        .sign_out(pb::SignOutRequest {
            refresh_token: saved.refresh_token,
        })
        .await
    {
        Ok(_) => out!("signed out ({})", saved.username),
        Err(e) => out!(
            "signed out here; the server did not confirm ({})",
            e.message()
        ),
    }
    Ok(())
}
