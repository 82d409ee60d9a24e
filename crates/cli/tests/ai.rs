//! The AI commands end to end: the real binary, its stdin and stdout.

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

fn draughts() -> Command {
    Command::new(env!("CARGO_BIN_EXE_draughts"))
}

fn run(args: &[&str]) -> (bool, String) {
    let out = draughts().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// [`run`] with the command's stderr (where progress, notes and errors go).
fn run_err(args: &[&str]) -> (bool, String) {
    let out = draughts().args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A `draughts hub` process: lines written to its stdin, its stdout read up to a line with a prefix.
struct Hub {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Hub {
    fn start(args: &[&str]) -> Hub {
        let mut child = draughts()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Hub {
            child,
            stdin,
            lines,
        }
    }

    /// The next line that starts with `prefix` (earlier lines are skipped).
    fn expect(&mut self, prefix: &str) -> String {
        loop {
            let line = self.lines.next().expect("a line").unwrap();
            if line.starts_with(prefix) {
                return line;
            }
        }
    }

    /// Sends `quit` and checks that the hub exits cleanly.
    fn quit(mut self) {
        writeln!(self.stdin, "quit").unwrap();
        assert!(self.child.wait().unwrap().success());
    }
}

#[test]
fn analyse_streams_depths_then_the_result() {
    let (ok, out) = run(&["analyse", "--variant", "english", "--depth", "5", "--json"]);
    assert!(ok);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 6, "{out}");
    assert!(lines[0].contains("\"depth\":1"));
    assert!(lines[5].contains("\"bestmove\""));
    let (ok, out) = run(&[
        "analyse",
        "--variant",
        "russian",
        "--nodes",
        "5000",
        "--multipv",
        "2",
    ]);
    assert!(ok);
    assert!(out.contains("multipv 2"), "{out}");
    assert!(out.lines().last().unwrap().starts_with("bestmove "));
}

#[test]
fn bestmove_plays_a_legal_move_at_every_level() {
    for level in ["1", "4", "6"] {
        let (ok, out) = run(&[
            "bestmove",
            "--variant",
            "italian",
            "--level",
            level,
            "--seed",
            "1",
        ]);
        assert!(ok);
        let mv = out.trim();
        let (ok, _) = run(&["play", "--variant", "italian", mv]);
        assert!(ok, "level {level} played {mv}");
    }
    let (ok, _) = run(&["bestmove", "--variant", "italian", "--level", "9"]);
    assert!(!ok);
}

#[test]
fn hub_session_answers_and_stops() {
    let mut hub = Hub::start(&["hub"]);
    writeln!(hub.stdin, "hub").unwrap();
    assert!(hub.expect("param name=variant").contains("normal"));
    hub.expect("wait");
    writeln!(
        hub.stdin,
        "set-param name=variant value=brazilian\nunknown-command x=1\ninit"
    )
    .unwrap();
    hub.expect("ready");
    writeln!(hub.stdin, "ping").unwrap();
    hub.expect("pong");
    // An infinite analysis from the start position after two moves, then stop.
    writeln!(
        hub.stdin,
        "new-game\npos pos=Wbbbbbbbbbbbbeeeeeeeewwwwwwwwwwww moves=\"22-18 9-13\"\nlevel infinite\ngo analyze"
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let asked = Instant::now();
    writeln!(hub.stdin, "stop").unwrap();
    let done = hub.expect("done move=");
    assert!(asked.elapsed() < Duration::from_secs(1));
    // The answer must be a legal White move after 22-18 9-13.
    let mv = done
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_start_matches("move=");
    let (ok, _) = run(&["play", "--variant", "brazilian", "22-18", "9-13", mv]);
    assert!(ok, "{done}");
    writeln!(hub.stdin, "level depth=3\ngo think").unwrap();
    hub.expect("done move=");
    hub.quit();
}

/// Canadian over the Hub protocol: `set-param name=variant value=canadian`, a 72-square position string
/// (docs/rules.md §5.4) with moves, and a legal answer.
#[test]
fn hub_plays_canadian() {
    let mut hub = Hub::start(&["hub"]);
    writeln!(hub.stdin, "hub").unwrap();
    hub.expect("wait");
    writeln!(hub.stdin, "set-param name=variant value=canadian\ninit").unwrap();
    hub.expect("ready");
    let start = format!("W{}{}{}", "b".repeat(30), "e".repeat(12), "w".repeat(30));
    writeln!(
        hub.stdin,
        "new-game\npos pos={start} moves=\"46-40 25-31\"\nlevel depth=4\ngo think"
    )
    .unwrap();
    let done = hub.expect("done move=");
    let mv = done
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_start_matches("move=");
    let (ok, _) = run(&["play", "--variant", "canadian", "46-40", "25-31", mv]);
    assert!(ok, "{done}");
    hub.quit();
}

#[test]
fn a_short_match_reports_a_result() {
    let (ok, out) = run(&[
        "match",
        "--variant",
        "english",
        "--a",
        "2",
        "--b",
        "greedy",
        "--games",
        "2",
        "--json",
    ]);
    assert!(ok);
    assert!(out.contains("\"games\":2"), "{out}");
}

/// Reads one field of the match report.
fn json_u64(out: &str, field: &str) -> u64 {
    let key = format!("\"{field}\":");
    let at = out.find(&key).unwrap_or_else(|| panic!("{field} in {out}")) + key.len();
    out[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap()
}

#[test]
fn the_hub_engine_plays_a_full_game_against_itself() {
    // Both sides are `draughts hub` processes driven through the protocol by the match runner, which
    // fails on any `error` line, an unparsable or illegal move, or a missing answer.
    let engine = format!("hub:{} hub", env!("CARGO_BIN_EXE_draughts"));
    let (ok, out) = run(&[
        "match",
        "--variant",
        "international",
        "--a",
        &engine,
        "--b",
        &engine,
        "--games",
        "1",
        "--movetime",
        "10",
        // Far above any real game: the draw rules end a game long before.
        "--max-plies",
        "2000",
        "--json",
    ]);
    assert!(ok, "{out}");
    assert_eq!(json_u64(&out, "games"), 1, "{out}");
    // Finished by the rules (a win or a rule draw), not cut off at the ply limit.
    assert_eq!(json_u64(&out, "adjudicated"), 0, "{out}");
}

#[test]
fn matches_of_levels_do_not_depend_on_concurrency() {
    let report = |concurrency: &str| {
        let (ok, out) = run(&[
            "match",
            "--variant",
            "english",
            "--a",
            "3",
            "--b",
            "2",
            "--games",
            "4",
            "--concurrency",
            concurrency,
            "--json",
        ]);
        assert!(ok, "{out}");
        ["wins", "draws", "losses"].map(|f| json_u64(&out, f))
    };
    assert_eq!(report("1"), report("3"));
}

/// `draughts hub --bitbases DIR` loads every variant's tables in DIR and probes them: a forced capture
/// into an english ending the tables call won scores as a table win (200 men and more) at depth 1.
#[test]
fn the_hub_probes_the_tables_it_is_given() {
    let tmp = tempfile::Builder::new()
        .prefix("draughts-hub-bb-")
        .tempdir()
        .unwrap();
    let dir_text = tmp.path().to_str().unwrap().to_string();
    let (ok, out) = run(&[
        "bitbase", "build", "-v", "english", "--pieces", "3", "-o", &dir_text,
    ]);
    assert!(ok, "{out}");
    // Run again: every slice is on disk already, so nothing is solved again.
    let (ok, again) = run(&[
        "bitbase", "build", "-v", "english", "--pieces", "3", "-o", &dir_text,
    ]);
    assert!(
        ok && again.contains("16 slices already in") && again.contains(": 0 slices solved"),
        "{again}"
    );
    // The forward pass's threads are bounded.
    let out = draughts()
        .args([
            "bitbase", "build", "-v", "english", "--pieces", "3", "-o", &dir_text,
        ])
        .args(["--threads", "1000"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("1..=256"), "{err}");
    let mut hub = Hub::start(&["hub", "--bitbases", &dir_text]);
    writeln!(hub.stdin, "hub\nset-param name=variant value=english\ninit").unwrap();
    hub.expect("ready");
    // W:WK11,K5:BK30,15 (white kings on 5 and 11, a black man on 15, a black king on 30): 11x18 is
    // forced and leaves two kings against one, a win.
    let mut squares = ['e'; 32];
    squares[4] = 'W';
    squares[10] = 'W';
    squares[14] = 'b';
    squares[29] = 'B';
    let pos: String = squares.iter().collect();
    writeln!(hub.stdin, "pos pos=W{pos}\nlevel depth=1\ngo think").unwrap();
    let info = hub.expect("info depth=1");
    let score: f64 = info
        .split_whitespace()
        .find_map(|w| w.strip_prefix("score="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(score >= 180.0, "a table win: {info}");
    hub.expect("done move=11x18");
    hub.quit();

    // A directory that is not there: a clear error, not a hub without its tables.
    let out = draughts()
        .args(["hub", "--bitbases", "/nonexistent/draughts-bitbases"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("/nonexistent/draughts-bitbases"),
        "{err}"
    );
}

/// `train gen` goes on after an interruption and makes its data in shards that merge exactly: a run cut
/// after two whole games (with half a third game written) and resumed, and two shards made apart and
/// concatenated, are byte for byte the file of one uninterrupted run; threads change nothing.
#[test]
fn self_play_resumes_and_its_shards_merge_exactly() {
    use draughts_ai::train::{Sample, WIDE_SAMPLE_BYTES, sample_bytes};
    let tmp = tempfile::Builder::new()
        .prefix("draughts-gen-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let gen_into = |out: &str, extra: &[&str]| {
        let mut args = vec![
            "train", "gen", "-v", "english", "--nodes", "60", "--seed", "7", "-o", out,
        ];
        args.extend_from_slice(extra);
        run_err(&args)
    };
    let (ok, err) = gen_into(&path("whole"), &["--games", "4", "--threads", "2"]);
    assert!(ok, "{err}");
    let whole = std::fs::read(path("whole")).unwrap();
    assert!(
        !std::path::Path::new(&format!("{}.progress", path("whole"))).exists(),
        "a finished run leaves no progress file"
    );
    // Where each game starts in the file.
    let size = sample_bytes(draughts_engine::Variant::English);
    let starts: Vec<usize> = whole
        .chunks_exact(size)
        .enumerate()
        .filter(|(_, c)| {
            Sample::from_bytes(c, size == WIDE_SAMPLE_BYTES)
                .unwrap()
                .game_start
        })
        .map(|(i, _)| i * size)
        .collect();
    assert_eq!(starts.len(), 4, "four games, each marked");

    // Interrupted after two whole games, half of the third on disk: resumed, the same file.
    let cut = starts[2];
    let partial = &whole[..cut + (starts[3] - cut) / 2];
    std::fs::write(path("resumed"), partial).unwrap();
    let settings = "variant=english games=4 first-game=0 nodes=60 eval=default seed=7 random=4-10 keep=quiet adjudicate=700 random-rate=0";
    std::fs::write(
        format!("{}.progress", path("resumed")),
        format!("v1\n{settings}\n2 {cut}\n"),
    )
    .unwrap();
    let (ok, err) = gen_into(&path("resumed"), &["--games", "4", "--threads", "1"]);
    assert!(
        !ok,
        "an interrupted run is not overwritten without --resume"
    );
    assert!(err.contains("--resume"), "{err}");
    let (ok, err) = gen_into(
        &path("resumed"),
        &["--games", "4", "--threads", "1", "--resume"],
    );
    assert!(ok, "{err}");
    assert!(err.contains("resuming: 2 of 4 games"), "{err}");
    assert!(
        std::fs::read(path("resumed")).unwrap() == whole,
        "resumed = uninterrupted"
    );
    // Nothing left to resume; other settings are refused.
    let (ok, err) = gen_into(&path("resumed"), &["--games", "4", "--resume"]);
    assert!(!ok && err.contains("nothing to resume"), "{err}");
    std::fs::write(
        format!("{}.progress", path("resumed")),
        format!("v1\n{settings}\n2 {cut}\n"),
    )
    .unwrap();
    let (ok, err) = gen_into(&path("resumed"), &["--games", "5", "--resume"]);
    assert!(!ok && err.contains("other settings"), "{err}");
    for other in [
        ["--keep", "no-capture"],
        ["--adjudicate", "0"],
        ["--random-rate", "20"],
    ] {
        let mut args = vec!["--games", "4", "--resume"];
        args.extend(other);
        let (ok, err) = gen_into(&path("resumed"), &args);
        assert!(!ok && err.contains("other settings"), "{other:?}: {err}");
    }

    // Two shards made apart, concatenated in order: the same file.
    let (ok, err) = gen_into(&path("shard0"), &["--games", "3", "--first-game", "0"]);
    assert!(ok, "{err}");
    let (ok, err) = gen_into(&path("shard1"), &["--games", "1", "--first-game", "3"]);
    assert!(ok, "{err}");
    let mut merged = std::fs::read(path("shard0")).unwrap();
    merged.extend(std::fs::read(path("shard1")).unwrap());
    assert!(merged == whole, "shards concatenated = one run");
}

/// `train relabel`: the same positions, marks and results with new scores; one thread or two, shards
/// concatenated, and a resumed run all give the same file; a file without game marks and a first game
/// past the end are refused with their reasons.
#[test]
fn relabelling_resumes_and_its_shards_merge_exactly() {
    use draughts_ai::train::{Sample, sample_bytes};
    let tmp = tempfile::Builder::new()
        .prefix("draughts-relabel-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let data = path("data");
    let (ok, err) = run_err(&[
        "train", "gen", "-v", "english", "--nodes", "60", "--seed", "3", "--games", "4", "-o",
        &data,
    ]);
    assert!(ok, "{err}");
    let relabel_into = |out: &str, extra: &[&str]| {
        let mut args = vec![
            "train", "relabel", "-v", "english", "--data", &data, "--nodes", "1500", "-o", out,
        ];
        args.extend_from_slice(extra);
        run_err(&args)
    };
    let (ok, err) = relabel_into(&path("two"), &["--threads", "2"]);
    assert!(ok, "{err}");
    let (ok, err) = relabel_into(&path("one"), &["--threads", "1"]);
    assert!(ok, "{err}");
    let whole = std::fs::read(path("two")).unwrap();
    assert!(
        whole == std::fs::read(path("one")).unwrap(),
        "threads change nothing"
    );
    let old = std::fs::read(&data).unwrap();
    assert_eq!(old.len(), whole.len());
    let size = sample_bytes(draughts_engine::Variant::English);
    let read = |b: &[u8]| -> Vec<Sample> {
        b.chunks_exact(size)
            .map(|c| Sample::from_bytes(c, false).unwrap())
            .collect()
    };
    let (before, after) = (read(&old), read(&whole));
    let mut changed = 0;
    for (o, n) in before.iter().zip(&after) {
        assert_eq!(Sample { score: 0, ..*o }, Sample { score: 0, ..*n });
        changed += usize::from(o.score != n.score);
    }
    assert!(changed > 0, "1,500 nodes score some position unlike 60");
    let starts: Vec<usize> = after
        .iter()
        .enumerate()
        .filter(|(_, s)| s.game_start)
        .map(|(i, _)| i * size)
        .collect();
    assert_eq!(starts.len(), 4);

    // Shards made apart, concatenated in order: the same file.
    let (ok, err) = relabel_into(&path("shard0"), &["--games", "3"]);
    assert!(ok, "{err}");
    let (ok, err) = relabel_into(&path("shard1"), &["--first-game", "3"]);
    assert!(ok, "{err}");
    let mut merged = std::fs::read(path("shard0")).unwrap();
    merged.extend(std::fs::read(path("shard1")).unwrap());
    assert!(merged == whole, "shards concatenated = one run");

    // Interrupted after two whole games with part of the third on disk: resumed, the same file.
    let cut = starts[2];
    std::fs::write(path("resumed"), &whole[..cut + size]).unwrap();
    let settings = format!(
        "relabel variant=english data={data} first-game=0 games=4 nodes=1500 eval=default search="
    );
    std::fs::write(
        format!("{}.progress", path("resumed")),
        format!("v1\n{settings}\n2 {cut}\n"),
    )
    .unwrap();
    let (ok, err) = relabel_into(&path("resumed"), &[]);
    assert!(!ok && err.contains("--resume"), "{err}");
    let (ok, err) = relabel_into(&path("resumed"), &["--resume"]);
    assert!(ok, "{err}");
    assert!(err.contains("resuming: 2 of 4 games"), "{err}");
    assert!(
        std::fs::read(path("resumed")).unwrap() == whole,
        "resumed = uninterrupted"
    );

    // Refusals.
    let (ok, err) = relabel_into(&path("past"), &["--first-game", "9"]);
    assert!(!ok && err.contains("holds 4 games"), "{err}");
    let unmarked: Vec<u8> = before
        .iter()
        .flat_map(|s| {
            Sample {
                game_start: false,
                ..*s
            }
            .to_bytes(false)
        })
        .collect();
    std::fs::write(path("unmarked"), unmarked).unwrap();
    // A file with no game marks, and one cut inside a sample.
    std::fs::write(path("cut"), &old[..old.len() - 1]).unwrap();
    for (file, refusal) in [
        ("unmarked", "marks no game starts"),
        ("cut", "is not a english data file"),
    ] {
        let data = path(file);
        let out = path(&format!("{file}.out"));
        let (ok, err) = run_err(&[
            "train", "relabel", "-v", "english", "--data", &data, "-o", &out,
        ]);
        assert!(!ok && err.contains(refusal), "{file}: {err}");
    }
}
