//! The plain output commands when their reader goes away (`draughts moves | head -1`).

use std::process::{Command, Stdio};

/// Runs `draughts args` with standard output a pipe whose reading end is already closed, so that every
/// write fails with a broken pipe; returns whether it succeeded and its stderr.
fn run_into_closed_pipe(args: &[&str]) -> (bool, String) {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_draughts"))
        .args(args)
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_reader_that_went_away_ends_the_command_quietly() {
    for args in [
        &["moves", "-v", "international"][..],
        &["moves", "-v", "russian", "--json"],
        &["perft", "-v", "english", "-d", "3", "--divide"],
        &["play", "-v", "international", "32-28"],
    ] {
        let (ok, stderr) = run_into_closed_pipe(args);
        assert!(ok, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn the_table_commands_end_quietly_too() {
    let tmp = tempfile::Builder::new()
        .prefix("draughts-output-")
        .tempdir()
        .unwrap();
    let dir = tmp.path();
    let tables = dir.to_str().unwrap();
    // Every solved slice writes a progress line from inside the solver's callback.
    let (ok, stderr) = run_into_closed_pipe(&[
        "bitbase",
        "build",
        "-v",
        "english",
        "--pieces",
        "2",
        "-o",
        tables,
        "--threads",
        "1",
    ]);
    assert!(ok, "build: {stderr}");
    assert!(!stderr.contains("panicked"), "build: {stderr}");
    // The first progress line ends the build; a build to a reader completes the tables.
    let again = Command::new(env!("CARGO_BIN_EXE_draughts"))
        .args([
            "bitbase", "build", "-v", "english", "--pieces", "2", "-o", tables,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{text}");
    assert!(text.contains("english up to 2 pieces"), "{text}");
    let (ok, stderr) = run_into_closed_pipe(&[
        "bitbase",
        "probe",
        "-v",
        "english",
        "--bitbases",
        tables,
        "--fen",
        "W:W10:B20",
    ]);
    assert!(ok, "probe: {stderr}");
    assert!(!stderr.contains("panicked"), "probe: {stderr}");
}
