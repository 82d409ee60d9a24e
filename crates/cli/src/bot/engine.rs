//! One Hub-protocol engine process (Scan 3.1's `protocol.txt`, which `draughts hub` speaks), driven
//! asynchronously: every wait has a deadline, so a silent or crashed engine is an error, never a hang.
//!
//! Engines of the first Hub syntax (Scan 2.0: `name ...` instead of `id name=...` in the handshake,
//! international only) are recognised in the handshake and driven in theirs: `new`, `pos <side><50
//! squares>` (the side in lower case), `time <ms>` (this move's time), `go`, then `info <depth> <mean
//! depth> <score in centi-men> ...` lines and `move <move> [<ponder>]`.
//!
//! The process runs `sh -c COMMAND` with piped stdin/stdout (stderr discarded) and is killed when the
//! [`HubEngine`] is dropped. A reader task turns stdout into lines on a channel; the channel closing is
//! the process exiting.

use std::process::Stdio;
use std::time::Duration;

use draughts_ai::hub;
use draughts_engine::Variant;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The longest line read from an engine, bytes (a Hub line is a few hundred).
const MAX_LINE: usize = 64 * 1024;

/// How long the engine may take to answer `hub` and `init` (loading tables, allocating hash).
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the engine failed; the bridge resigns or reports the game with this text.
#[derive(Debug)]
pub(crate) enum EngineError {
    Start(std::io::Error),
    Exited,
    Silent(Duration, &'static str),
    Variant(&'static str),
    Reported(String),
    NoMove,
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Start(e) => write!(f, "cannot start the engine: {e}"),
            EngineError::Exited => f.write_str("the engine exited"),
            EngineError::Silent(waited, expected) => {
                write!(
                    f,
                    "the engine said nothing for {waited:?} (expected '{expected}')"
                )
            }
            EngineError::Variant(v) => write!(f, "the engine does not play {v}"),
            EngineError::Reported(message) => write!(f, "the engine reported an error: {message}"),
            EngineError::NoMove => f.write_str("the engine sent no move"),
        }
    }
}

/// What the engine said about itself in the handshake.
#[derive(Clone, Debug, Default)]
pub(crate) struct EngineInfo {
    /// From `id name=...`.
    pub(crate) name: String,
    /// From `param name=variant ... values="..."`: empty when the engine did not say (then only the
    /// international game is assumed, as in Scan's default).
    pub(crate) variants: Vec<Variant>,
    /// The first Hub syntax (Scan 2.0; see the module docs).
    pub(crate) first_syntax: bool,
}

impl EngineInfo {
    pub(crate) fn plays(&self, variant: Variant) -> bool {
        if self.variants.is_empty() {
            variant == Variant::International
        } else {
            self.variants.contains(&variant)
        }
    }
}

/// A running engine.
#[derive(Debug)]
pub(crate) struct HubEngine {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    pub(crate) info: EngineInfo,
}

impl HubEngine {
    /// Starts `command` and runs the handshake (`hub` ... `wait`); with `variant`, also selects it and
    /// waits for `ready` after `init`.
    pub(crate) async fn start(
        command: &str,
        variant: Option<Variant>,
    ) -> Result<HubEngine, EngineError> {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(EngineError::Start)?;
        let stdin = child.stdin.take().ok_or(EngineError::Exited)?;
        let stdout = child.stdout.take().ok_or(EngineError::Exited)?;
        // Bounded: an engine flooding its output waits on us rather than growing our memory.
        let (tx, rx) = mpsc::channel(256);
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout);
            loop {
                // At most MAX_LINE bytes a line: an engine writing without end is an engine that
                // exited, not a growing buffer.
                let mut line = Vec::new();
                let read = (&mut reader)
                    .take(MAX_LINE as u64)
                    .read_until(b'\n', &mut line)
                    .await;
                let complete = line.ends_with(b"\n");
                if !matches!(read, Ok(n) if n > 0) || (!complete && line.len() >= MAX_LINE) {
                    break;
                }
                let text = String::from_utf8_lossy(&line).trim_end().to_owned();
                if tx.send(text).await.is_err() {
                    break;
                }
            }
        });
        let mut engine = HubEngine {
            child,
            stdin,
            lines: rx,
            info: EngineInfo::default(),
        };
        engine.send("hub").await?;
        let deadline = Instant::now() + HANDSHAKE_TIMEOUT;
        loop {
            let line = engine.next_line(deadline, "wait").await?;
            match line.command.as_str() {
                "wait" => break,
                "id" => engine.info.name = line.get("name").unwrap_or_default().to_owned(),
                // The first syntax: `name Scan 2.0`.
                "name" => {
                    engine.info.first_syntax = true;
                    engine.info.name = line
                        .args
                        .iter()
                        .map(|(k, _)| k.as_str())
                        .collect::<Vec<_>>()
                        .join(" ");
                }
                "param" if line.get("name") == Some("variant") => {
                    engine.info.variants = line
                        .get("values")
                        .unwrap_or_default()
                        .split_whitespace()
                        .filter_map(hub::parse_variant)
                        .collect();
                }
                _ => {}
            }
        }
        if let Some(variant) = variant {
            if !engine.info.plays(variant) {
                return Err(EngineError::Variant(variant.key()));
            }
            if !engine.info.variants.is_empty() {
                engine
                    .send(&format!(
                        "set-param name=variant value={}",
                        hub::variant_name(variant)
                    ))
                    .await?;
            }
            engine.send("init").await?;
            engine
                .expect("ready", Instant::now() + HANDSHAKE_TIMEOUT)
                .await?;
        }
        Ok(engine)
    }

    /// Sends one line.
    pub(crate) async fn send(&mut self, line: &str) -> Result<(), EngineError> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.stdin
            .write_all(&bytes)
            .await
            .map_err(|_| EngineError::Exited)?;
        self.stdin.flush().await.map_err(|_| EngineError::Exited)
    }

    /// The next parsed line before `deadline`.
    async fn next_line(
        &mut self,
        deadline: Instant,
        expected: &'static str,
    ) -> Result<hub::Line, EngineError> {
        loop {
            let started = Instant::now();
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Err(_) => {
                    return Err(EngineError::Silent(
                        deadline.saturating_duration_since(started),
                        expected,
                    ));
                }
                Ok(None) => return Err(EngineError::Exited),
                Ok(Some(text)) => {
                    if let Some(line) = hub::parse_line(&text) {
                        if line.command == "error" {
                            let message = line.get("message").unwrap_or(&text);
                            return Err(EngineError::Reported(message.chars().take(200).collect()));
                        }
                        return Ok(line);
                    }
                }
            }
        }
    }

    /// Skips lines until one whose command is `command`.
    pub(crate) async fn expect(
        &mut self,
        command: &'static str,
        deadline: Instant,
    ) -> Result<hub::Line, EngineError> {
        loop {
            let line = self.next_line(deadline, command).await?;
            if line.command == command {
                return Ok(line);
            }
        }
    }

    /// Skips lines until `done`, keeping the score of the last `info` line that has one.
    async fn expect_done(
        &mut self,
        deadline: Instant,
        score: &mut Option<f64>,
    ) -> Result<hub::Line, EngineError> {
        loop {
            let line = self.next_line(deadline, "done").await?;
            match line.command.as_str() {
                "done" => return Ok(line),
                "info" => {
                    if let Some(s) = line
                        .get("score")
                        .and_then(|s| s.parse::<f64>().ok())
                        .filter(|s| s.is_finite())
                    {
                        *score = Some(s);
                    }
                }
                _ => {}
            }
        }
    }

    /// Asks for a move: `pos`, `level move-time=`, `go think`, then waits for `done` until `deadline`
    /// (`think` is the budget the engine is told, `deadline` the latest its answer is taken). When the
    /// deadline passes, `stop` is sent and the answer is waited for a further `grace`. The move, and
    /// the engine's last score for it (men, its own side), if its `info` lines gave one.
    /// `current` is the position now (Hub text), for engines of the first syntax.
    pub(crate) async fn best_move(
        &mut self,
        start_pos: &str,
        moves: &[String],
        current: &str,
        think: Duration,
        deadline: Instant,
        grace: Duration,
    ) -> Result<(String, Option<f64>), EngineError> {
        if self.info.first_syntax {
            return self.best_move_first(current, think, deadline, grace).await;
        }
        let pos = format!(
            "pos pos={start_pos} moves=\"{}\"\nlevel move-time={:.3}\ngo think",
            moves.join(" "),
            think.as_secs_f64()
        );
        self.send(&pos).await?;
        let mut score = None;
        let done = match self.expect_done(deadline, &mut score).await {
            Ok(done) => done,
            Err(EngineError::Silent(..)) => {
                self.send("stop").await?;
                self.expect_done(Instant::now() + grace, &mut score).await?
            }
            Err(e) => return Err(e),
        };
        match done.get("move") {
            Some(text) if !text.is_empty() => Ok((text.chars().take(200).collect(), score)),
            _ => Err(EngineError::NoMove),
        }
    }

    /// [`HubEngine::best_move`] in the first syntax.
    async fn best_move_first(
        &mut self,
        current: &str,
        think: Duration,
        deadline: Instant,
        grace: Duration,
    ) -> Result<(String, Option<f64>), EngineError> {
        let mut pos = current.to_owned();
        pos[..1].make_ascii_lowercase();
        self.send(&format!("pos {pos}\ntime {}\ngo", think.as_millis().max(1)))
            .await?;
        let mut score = None;
        let done = match self.expect_move_first(deadline, &mut score).await {
            Ok(done) => done,
            Err(EngineError::Silent(..)) => {
                self.send("stop").await?;
                self.expect_move_first(Instant::now() + grace, &mut score)
                    .await?
            }
            Err(e) => return Err(e),
        };
        match done.args.first() {
            Some((text, _)) if !text.is_empty() => Ok((text.chars().take(200).collect(), score)),
            _ => Err(EngineError::NoMove),
        }
    }

    /// Skips lines until `move`, keeping the score (centi-men, the third field) of the last `info`.
    async fn expect_move_first(
        &mut self,
        deadline: Instant,
        score: &mut Option<f64>,
    ) -> Result<hub::Line, EngineError> {
        loop {
            let line = self.next_line(deadline, "move").await?;
            match line.command.as_str() {
                "move" => return Ok(line),
                "info" => {
                    if let Some(s) = line.args.get(2).and_then(|(k, _)| k.parse::<i32>().ok()) {
                        *score = Some(f64::from(s) / 100.0);
                    }
                }
                _ => {}
            }
        }
    }

    /// Tells the engine a new game starts.
    pub(crate) async fn new_game(&mut self) -> Result<(), EngineError> {
        let command = if self.info.first_syntax {
            "new"
        } else {
            "new-game"
        };
        self.send(command).await
    }

    /// Asks the engine to quit, then kills it if it has not exited within a moment.
    pub(crate) async fn quit(mut self) {
        let _ = self.send("quit").await;
        if tokio::time::timeout(Duration::from_millis(500), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use draughts_engine::Position;

    /// An engine of the first Hub syntax (Scan 2.0's handshake and answers), written as a shell
    /// script that records what it is sent: the bridge recognises it and speaks its syntax.
    #[tokio::test]
    async fn first_syntax_engines_are_driven_in_theirs() {
        let tmp = tempfile::Builder::new()
            .prefix("draughts-first-hub-")
            .tempdir()
            .unwrap();
        let dir = tmp.path();
        let d = dir.display();
        let script = format!(
            "while read -r line; do\n  case \"$line\" in\n    hub) echo 'name Scan 2.0'; echo 'author Fabien Letouzey'; echo wait;;\n    init) echo ready;;\n    new) echo new > {d}/new;;\n    pos*) echo \"$line\" > {d}/pos;;\n    time*) echo \"$line\" > {d}/time;;\n    go) echo 'info 5 4.0 -12 100 0.01 1.0 32-28'; echo 'move 32-28 19-23';;\n    quit) exit 0;;\n  esac\ndone\n"
        );
        std::fs::write(dir.join("engine.sh"), script).unwrap();
        let command = format!("sh {d}/engine.sh");
        let mut engine = HubEngine::start(&command, Some(Variant::International))
            .await
            .unwrap();
        assert!(engine.info.first_syntax);
        assert_eq!(engine.info.name, "Scan 2.0");
        engine.new_game().await.unwrap();
        let start = Position::start(Variant::International);
        let current = hub::write_position(&start);
        let (text, score) = engine
            .best_move(
                &current,
                &[],
                &current,
                Duration::from_millis(250),
                Instant::now() + Duration::from_secs(10),
                Duration::from_millis(500),
            )
            .await
            .unwrap();
        assert_eq!((text.as_str(), score), ("32-28", Some(-0.12)));
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap();
        let mut expected = current.clone();
        expected[..1].make_ascii_lowercase();
        assert_eq!(read("pos").trim(), format!("pos {expected}"));
        assert!(expected.starts_with('w') && expected.len() == 51);
        assert_eq!(read("time").trim(), "time 250");
        assert_eq!(read("new").trim(), "new");
        engine.quit().await;
        // It plays international only.
        assert!(matches!(
            HubEngine::start(&command, Some(Variant::English)).await,
            Err(EngineError::Variant(_))
        ));
    }
}
