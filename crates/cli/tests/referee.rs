//! Opt-in (`DRAUGHTS_REFEREE=1`, needs `python3`): the canadian move generator against the independent
//! referee of `scripts/differential_canadian.py` (written from docs/rules.md §12.2, not from the engine), on
//! random positions, through this build's `draughts` binary. `DRAUGHTS_REFEREE_POSITIONS` sets the number
//! of positions (default 3000).

use std::path::Path;
use std::process::Command;

#[test]
fn canadian_moves_agree_with_the_independent_referee() {
    if std::env::var("DRAUGHTS_REFEREE").map_or(true, |v| v.is_empty() || v == "0") {
        eprintln!("skipped: set DRAUGHTS_REFEREE=1 to run the canadian referee");
        return;
    }
    let positions = std::env::var("DRAUGHTS_REFEREE_POSITIONS").unwrap_or_else(|_| "3000".into());
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/differential_canadian.py");
    let out = Command::new("python3")
        .arg(&script)
        .args(["--positions", &positions, "--seed", "1", "--jobs", "2"])
        .arg("--binary")
        .arg(env!("CARGO_BIN_EXE_draughts"))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!("{stdout}");
    assert!(
        out.status.success(),
        "the referee disagrees: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(": 0 mismatches"), "{stdout}");
}
