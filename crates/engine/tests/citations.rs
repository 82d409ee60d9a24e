//! Every citation in the engine resolves inside the repository: `docs/rules.md §N.M` names an article of the
//! rule book, every `source=ID` of a perft data file names a publication listed in `docs/perft.md`, and no
//! file points outside the project (a build machine's path, the old shared notes).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The engine's sources, tests and perft data.
fn cited_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in ["src", "tests", "tests/data"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = entry.unwrap().path();
            let ext = p.extension().and_then(|e| e.to_str());
            let this_file = p.file_name().and_then(|f| f.to_str()) == Some("citations.rs");
            if matches!(ext, Some("rs" | "perft")) && !this_file {
                out.push(p);
            }
        }
    }
    assert!(out.len() > 10, "found only {} files", out.len());
    out
}

/// `§N` or `§N.M` numbers following `marker` in `text`.
fn articles_after(text: &str, marker: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices(marker) {
        let rest = &text[i + marker.len()..];
        let n: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        let n = n.trim_end_matches('.').to_string();
        if !n.is_empty() {
            out.push(n);
        }
    }
    out
}

/// The articles `docs/rules.md` defines: `## N.` headings, and `§N.M` at the start of a bullet, a table
/// cell or a clause (`- §N.M`, `| §N.M`, `; §N.M`).
fn defined_articles(book: &str) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for line in book.lines() {
        if let Some(h) = line.strip_prefix("## ")
            && let Some((n, _)) = h.split_once(". ")
            && n.chars().all(|c| c.is_ascii_digit())
        {
            set.insert(n.to_string());
        }
    }
    for marker in ["- §", "| §", "; §"] {
        set.extend(articles_after(book, marker));
    }
    set
}

#[test]
fn rule_book_citations_resolve() {
    let book = read(&repo().join("docs/rules.md"));
    let defined = defined_articles(&book);
    assert!(
        defined.contains("3.1") && defined.contains("6.2"),
        "{defined:?}"
    );
    let mut n_citations = 0;
    for file in cited_files() {
        let text = read(&file);
        for cited in articles_after(&text, "docs/rules.md §") {
            n_citations += 1;
            assert!(
                defined.contains(&cited),
                "{}: cites docs/rules.md §{cited}, which the rule book does not define",
                file.display()
            );
        }
        // A list of articles after one citation: `docs/rules.md §2.2, §7.1`.
        for (i, _) in text.match_indices("docs/rules.md §") {
            let line_end = text[i..].find('\n').map_or(text.len(), |j| i + j);
            for cited in articles_after(&text[i..line_end], ", §") {
                assert!(
                    defined.contains(&cited),
                    "{}: cites §{cited}, which docs/rules.md does not define",
                    file.display()
                );
            }
        }
    }
    assert!(n_citations >= 20, "only {n_citations} citations found");
}

#[test]
fn perft_sources_are_listed() {
    let table = read(&repo().join("docs/perft.md"));
    let mut ids = BTreeSet::new();
    for file in cited_files() {
        if file.extension().and_then(|e| e.to_str()) != Some("perft") {
            continue;
        }
        let text = read(&file);
        for line in text.lines().filter(|l| l.starts_with("perft ")) {
            let id = line
                .split_whitespace()
                .find_map(|f| f.strip_prefix("source="))
                .unwrap_or_else(|| panic!("{}: '{line}' names no source", file.display()));
            ids.insert(id.to_string());
        }
    }
    assert!(ids.len() >= 5, "{ids:?}");
    for id in &ids {
        assert!(
            table.contains(&format!("- `{id}`:")),
            "source '{id}' is not listed in docs/perft.md"
        );
    }
}

#[test]
fn no_citation_points_outside_the_repository() {
    for file in cited_files() {
        let text = read(&file);
        for bad in [
            "/work/",
            "shared/rules.md",
            "perft-start.md",
            "/home/",
            "/tmp/",
        ] {
            assert!(
                !text.contains(bad),
                "{} mentions '{bad}', a path outside the repository",
                file.display()
            );
        }
    }
}
