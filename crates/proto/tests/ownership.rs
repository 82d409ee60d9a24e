//! Each service owns its data: no service's source names another service's table, key, schedule or
//! consumer group (`draughts_proto::contract::ownership::PRIVATE`), nor uses another service's private
//! contract module (`PRIVATE_CONTRACTS`); others learn through what the owner publishes.
//!
//! The scan reads every `.rs` file under `services/*/src` (the composition root `services/draughtsd`
//! included) and each private contract module of `crates/proto` as its owner's, with comments removed, and looks for each private name in the string literals (where
//! SQL and key names are written; a table in the literals that are SQL) and for `contract::<module>`
//! paths in the code. It also checks that
//! the declarations are complete and current: every `CREATE TABLE` of a service is declared for it,
//! and every declared name is still in its owner's source.

use std::path::{Path, PathBuf};

use draughts_proto::contract::ownership::{Kind, PRIVATE, PRIVATE_CONTRACTS};

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

/// A Rust source split into its code (comments and literals blanked, lines kept) and its string
/// literals (with the line each starts on).
#[derive(Debug, Default, PartialEq)]
struct Split {
    code: String,
    literals: Vec<(usize, String)>,
}

fn split(text: &str) -> Split {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Split::default();
    let mut line = 1;
    let mut i = 0;
    let keep_newlines = |c: char, code: &mut String| code.push(if c == '\n' { '\n' } else { ' ' });
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    keep_newlines(chars[i], &mut out.code);
                    i += 1;
                }
            }
        } else if c == '"'
            || (c == 'r'
                && matches!(next, Some('"') | Some('#'))
                && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')))
        {
            // A string literal, plain or raw (r"..", r#".."#).
            let raw = c == 'r';
            let mut hashes = 0;
            if raw {
                i += 1;
                while chars.get(i) == Some(&'#') {
                    hashes += 1;
                    i += 1;
                }
                if chars.get(i) != Some(&'"') {
                    continue;
                }
            }
            i += 1;
            let start_line = line;
            let mut literal = String::new();
            while i < chars.len() {
                let d = chars[i];
                if !raw && d == '\\' {
                    literal.push(d);
                    if let Some(&e) = chars.get(i + 1) {
                        literal.push(e);
                    }
                    i += 2;
                    continue;
                }
                if d == '"' && (0..hashes).all(|k| chars.get(i + 1 + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                if d == '\n' {
                    line += 1;
                }
                keep_newlines(d, &mut out.code);
                literal.push(d);
                i += 1;
            }
            out.code.push_str("\"\"");
            out.literals.push((start_line, literal));
        } else if c == '\'' {
            // A char literal ('"', '\'', '\n') or a lifetime.
            if next == Some('\\') {
                let close = (i + 2..chars.len().min(i + 12)).find(|&k| chars[k] == '\'');
                i = close.map_or(i + 1, |k| k + 1);
                out.code.push_str("' '");
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.code.push_str("' '");
            } else {
                out.code.push(c);
                i += 1;
            }
        } else {
            if c == '\n' {
                line += 1;
            }
            out.code.push(c);
            i += 1;
        }
    }
    out
}

/// Whether `text` contains `name` as a whole name: not inside a longer identifier or key name.
fn names(text: &str, name: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let open_end = !name.ends_with(part);
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(part) && (open_end || !after.is_some_and(part))
    })
}

/// Every `.rs` file of `services/<name>/src`, by service.
fn services() -> Vec<(String, Vec<(PathBuf, Split)>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../services");
    let mut out = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("services/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        files.sort();
        let split = files
            .into_iter()
            .map(|f| {
                let text = std::fs::read_to_string(&f).unwrap();
                (f, split(&text))
            })
            .collect();
        out.push((name, split));
    }
    out
}

/// The services' files, each private contract module of `crates/proto` counted as its owner's.
fn services_and_their_contracts() -> Vec<(String, Vec<(PathBuf, Split)>)> {
    let mut services = services();
    let contracts = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/contract");
    for (owner, module) in PRIVATE_CONTRACTS {
        let file = contracts.join(format!("{module}.rs"));
        let text = std::fs::read_to_string(&file).expect("a private contract module");
        if let Some((_, files)) = services.iter_mut().find(|(s, _)| s == owner) {
            files.push((file, split(&text)));
        }
    }
    services
}

#[test]
fn no_service_names_another_services_data() {
    let services = services_and_their_contracts();
    assert!(services.len() >= 5, "found {} services", services.len());
    let mut found = Vec::new();
    for (service, files) in &services {
        for (file, split) in files {
            for owned in PRIVATE.iter().filter(|o| o.owner != service) {
                for (line, literal) in &split.literals {
                    // Tables are named in SQL (a table may be called by a plain word: `ratings`).
                    let sql = [
                        "SELECT ", "INSERT ", "UPDATE ", "DELETE ", "FROM ", "JOIN ", "TABLE ",
                    ]
                    .iter()
                    .any(|k| literal.contains(k));
                    if (owned.kind != Kind::Table || sql) && names(literal, owned.name) {
                        found.push(format!(
                            "{}:{line}: {:?} {:?} of {}",
                            file.display(),
                            owned.kind,
                            owned.name,
                            owned.owner
                        ));
                    }
                }
            }
            for (owner, module) in PRIVATE_CONTRACTS.iter().filter(|(o, _)| o != service) {
                for (i, code) in split.code.lines().enumerate() {
                    let uses = code.match_indices("contract::").any(|(at, _)| {
                        let rest = &code[at + "contract::".len()..];
                        let path = rest.strip_prefix('{').unwrap_or(rest);
                        let group = path.split('}').next().unwrap_or(path);
                        group
                            .split(|c: char| c == ',' || c.is_whitespace() || c == ':')
                            .any(|part| part == *module)
                    });
                    if uses {
                        found.push(format!(
                            "{}:{}: contract::{module}, private to {owner}",
                            file.display(),
                            i + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a service names another service's data (learn it from what the owner publishes):\n{}",
        found.join("\n")
    );
}

#[test]
fn every_table_is_declared_and_every_declaration_is_used() {
    let services = services();
    let mut problems = Vec::new();
    for (service, files) in &services {
        let literals: Vec<&str> = files
            .iter()
            .flat_map(|(_, s)| s.literals.iter().map(|(_, l)| l.as_str()))
            .collect();
        for literal in &literals {
            for (at, _) in literal.match_indices("CREATE TABLE ") {
                let rest = literal[at + "CREATE TABLE ".len()..].trim_start();
                let rest = rest.strip_prefix("IF NOT EXISTS ").unwrap_or(rest);
                let table: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let declared = PRIVATE
                    .iter()
                    .any(|o| o.owner == service && o.kind == Kind::Table && o.name == table);
                if !declared {
                    problems.push(format!(
                        "services/{service} creates table {table}, not declared in contract::ownership"
                    ));
                }
            }
        }
        for owned in PRIVATE.iter().filter(|o| o.owner == service) {
            if !literals.iter().any(|l| names(l, owned.name)) {
                problems.push(format!(
                    "{:?} {:?} is declared for {service} but its source no longer names it",
                    owned.kind, owned.name
                ));
            }
        }
    }
    let owners: Vec<&str> = services.iter().map(|(s, _)| s.as_str()).collect();
    for owned in PRIVATE {
        if !owners.contains(&owned.owner) {
            problems.push(format!("{:?}: no service {}", owned.name, owned.owner));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_scanner_reads_literals_and_code() {
    let text = r##"
// "finished_games" in a comment is not a use
let a = "SELECT 1 FROM finished_games"; /* "game-deadlines" */
let b = r#"raw "quoted" game-deadlines"#;
let c = '"'; let d = "x"; use crate::contract::{self, matchmaking as mm};
"##;
    let s = split(text);
    let literals: Vec<&str> = s.literals.iter().map(|(_, l)| l.as_str()).collect();
    assert_eq!(
        literals,
        [
            "SELECT 1 FROM finished_games",
            "raw \"quoted\" game-deadlines",
            "x"
        ]
    );
    assert_eq!(s.literals[0].0, 3);
    assert!(!s.code.contains("finished_games"));
    assert!(s.code.contains("contract::{self, matchmaking as mm}"));
    assert!(names("FROM finished_games WHERE", "finished_games"));
    assert!(!names("list_finished_games", "finished_games"));
    assert!(!names("my-game-deadlines-2", "game-deadlines"));
    assert!(names("game:{{{id}}}", "game:{"));
    assert!(!names("ratings-url", "ratings"));
}
