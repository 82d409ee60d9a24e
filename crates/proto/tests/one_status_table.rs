//! Every edge error goes through the one status table (`draughts_proto::error`): no non-test source
//! file of the workspace outside `crates/proto` builds a `tonic::Status` itself. Services return their
//! error enum (`ServiceError::to_status`, `From<...> for Status`) or `ApiError`.
//!
//! The scan reads every `.rs` file under `crates/*/src` and `services/*/src` (code after a
//! `#[cfg(test)]` line and comment lines are skipped) for a `Status::<constructor>(` call.

use std::path::{Path, PathBuf};

/// Files that may build a status, and why.
const ALLOWED: &[(&str, &str)] = &[
    (
        "crates/loadgen/src/load.rs",
        "client side: records a call that timed out or could not connect as the status it stands for",
    ),
    (
        "services/validation/src/games/grpc.rs",
        "being converted by the games work (issue 10 point 1); remove this entry with it",
    ),
    (
        "services/validation/src/games/watch.rs",
        "one UNAVAILABLE at shutdown, in the games edge the games work converts; remove this entry with it",
    ),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `Status::name(` calls of `text` outside tests and comments: (line number, line).
fn status_builds(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("#[cfg(test)]") {
            break;
        }
        if code.starts_with("//") {
            continue;
        }
        let bytes = code.as_bytes();
        let mut at = 0;
        while let Some(offset) = code[at..].find("Status::") {
            let start = at + offset;
            let before_ok = start == 0 || {
                let b = bytes[start - 1];
                !(b.is_ascii_alphanumeric() || b == b'_')
            };
            let rest = &code[start + "Status::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            let is_call = rest[name.len()..].trim_start().starts_with('(');
            if before_ok && is_call && name.starts_with(|c: char| c.is_ascii_lowercase()) {
                found.push((i + 1, line.trim().to_owned()));
            }
            at = start + "Status::".len();
        }
    }
    found
}

#[test]
fn the_scan_finds_what_it_looks_for() {
    assert_eq!(
        status_builds("let s = tonic::Status::invalid_argument(\"x\");").len(),
        1
    );
    assert_eq!(status_builds("Err(Status::new(code, m))").len(), 1);
    assert_eq!(status_builds("map_err(Status::invalid_argument)").len(), 0);
    assert!(status_builds("GameStatus::Finished(r) => ServingStatus::Serving").is_empty());
    assert!(status_builds("// Status::internal(\"x\")").is_empty());
    assert!(status_builds("#[cfg(test)]\nmod tests { Status::internal(\"x\") }").is_empty());
}

#[test]
fn no_source_outside_proto_builds_a_status() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for group in ["crates", "services"] {
        let Ok(members) = std::fs::read_dir(root.join(group)) else {
            continue;
        };
        for member in members.flatten() {
            if member.file_name() == "proto" && group == "crates" {
                continue;
            }
            rust_files(&member.path().join("src"), &mut files);
        }
    }
    assert!(
        files.len() > 20,
        "the scan found only {} files",
        files.len()
    );
    let mut offenders = Vec::new();
    for file in files {
        let relative = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .to_string_lossy()
            .replace('\\', "/");
        if ALLOWED.iter().any(|(path, _)| *path == relative) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, code) in status_builds(&text) {
            offenders.push(format!("{relative}:{line}: {code}"));
        }
        // A function path passed as a value builds statuses too (`map_err(Status::invalid_argument)`).
        for (i, text_line) in text.lines().enumerate() {
            if text_line.trim_start().starts_with("#[cfg(test)]") {
                break;
            }
            if text_line.contains("(Status::") || text_line.contains("(tonic::Status::") {
                let after = text_line
                    .split("Status::")
                    .nth(1)
                    .unwrap_or("")
                    .trim_start();
                if after.starts_with(|c: char| c.is_ascii_lowercase()) {
                    offenders.push(format!("{relative}:{}: {}", i + 1, text_line.trim()));
                }
            }
        }
    }
    offenders.sort();
    offenders.dedup();
    assert!(
        offenders.is_empty(),
        "build statuses through the status table (ServiceError::to_status / ApiError), not directly:\n{}",
        offenders.join("\n")
    );
}
