//! Every logging call of the controller binary's crates is in `docs/log-levels.md`, with the
//! level it logs at; and where kube-controller-manager writes the same line, the level is
//! upstream's (issue 24 item 4). The table was checked against upstream's sources; this test
//! keeps the code and the table together: a new line, a changed level or a stale row fails it.

#![allow(clippy::expect_used, clippy::unwrap_used)] // test helpers panic on failure

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The source trees of the binary and of every crate it links that logs.
const ROOTS: &[&str] = &[
    "crates/horizontal/src",
    "crates/metrics/src",
    "crates/replica-calculator/src",
    "crates/workqueue/src",
    "crates/config/src",
    "crates/decision/src",
    "crates/quantity/src",
    "crates/history/src",
    "crates/sharding/src",
    "cmd/kube-hpa-controller/src",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a readable directory entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// A logging call: its message (the format string) and its klog level.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Line {
    message: String,
    level: String,
}

/// The string literals at the top level of a macro's arguments, and the arguments' text.
/// `text` starts just after the macro's opening parenthesis.
fn arguments(text: &str) -> (Vec<String>, &str) {
    let bytes = text.as_bytes();
    let (mut depth, mut i, mut literals) = (1usize, 0usize, Vec::new());
    while i < bytes.len() && depth > 0 {
        match bytes[i] {
            b'"' => {
                let start = i + 1;
                i = start;
                while bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if depth == 1 {
                    literals.push(text[start..i].to_string());
                }
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    (literals, &text[..i.saturating_sub(1)])
}

/// The value of a `v = N` field among the arguments, if any.
fn v_field(args: &str) -> Option<String> {
    let at = args.find("v = ")?;
    if at > 0 && args.as_bytes()[at - 1].is_ascii_alphanumeric() {
        return None;
    }
    let digits: String = args[at + 4..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!digits.is_empty()).then_some(digits)
}

fn calls_in(source: &str) -> Vec<Line> {
    // Inline unit-test modules log in tests only.
    let source = source
        .find("#[cfg(test)]\nmod tests {")
        .map_or(source, |cut| &source[..cut]);
    let mut lines = Vec::new();
    for (macro_name, level_of) in [
        ("tracing::error!(", "Error"),
        ("tracing::warn!(", "Warning"),
        ("tracing::info!(", "0"),
        ("tracing::debug!(", "2"),
        ("tracing::trace!(", "4"),
        ("crate::v!(", "v"),
    ] {
        for (at, _) in source.match_indices(macro_name) {
            // `$crate::v!` and `::tracing::…!` inside macro definitions are not calls.
            if source[..at].ends_with('$') || source[..at].ends_with("::") {
                continue;
            }
            let (literals, args) = arguments(&source[at + macro_name.len()..]);
            if args.contains("$(") {
                continue;
            }
            let message = literals
                .last()
                .unwrap_or_else(|| panic!("a logging call without a message: {macro_name}{args})"))
                .clone();
            let level = match level_of {
                "Error" | "Warning" => level_of.to_string(),
                "v" => {
                    let first = args.split(',').next().unwrap_or("").trim();
                    if first.chars().all(|c| c.is_ascii_digit()) {
                        format!("V({first})")
                    } else {
                        "V(n)".to_string()
                    }
                }
                default => format!(
                    "V({})",
                    v_field(args).unwrap_or_else(|| default.to_string())
                ),
            };
            lines.push(Line { message, level });
        }
    }
    lines
}

/// `(message, level here, upstream)` of each row of the table.
fn table() -> Vec<(Line, String)> {
    let doc = fs::read_to_string(repo().join("docs/log-levels.md")).expect("docs/log-levels.md");
    doc.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|row| {
            let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
            assert!(cells.len() >= 4, "a short row: {row}");
            let message = cells[0].trim_matches('`').to_string();
            (
                Line {
                    message,
                    level: cells[1].to_string(),
                },
                cells[2].to_string(),
            )
        })
        .collect()
}

#[test]
fn every_log_line_is_in_the_table_at_upstreams_level() {
    let mut files = Vec::new();
    for root in ROOTS {
        rust_files(&repo().join(root), &mut files);
    }
    let mut found = BTreeSet::new();
    for file in &files {
        let source = fs::read_to_string(file).expect("a readable source file");
        found.extend(calls_in(&source));
    }
    assert!(found.len() > 50, "only {} log lines found", found.len());
    let rows = table();
    let listed: BTreeSet<Line> = rows.iter().map(|(l, _)| l.clone()).collect();
    let missing: Vec<_> = found.difference(&listed).collect();
    assert!(
        missing.is_empty(),
        "log lines missing from docs/log-levels.md (add a row with upstream's level, or \
         explain why this project alone writes it): {missing:#?}"
    );
    let stale: Vec<_> = listed.difference(&found).collect();
    assert!(
        stale.is_empty(),
        "rows of docs/log-levels.md no code writes: {stale:#?}"
    );
    for (line, upstream) in &rows {
        if upstream != "—" {
            assert_eq!(
                &line.level, upstream,
                "{:?} is written at {} here and at {upstream} upstream",
                line.message, line.level
            );
        }
    }
}

#[test]
fn the_scanner_reads_levels_as_the_logging_module_maps_them() {
    let source = r#"
        tracing::error!(error = %e, "a");
        tracing::warn!("b {}", x);
        tracing::info!(v = 1, "c");
        tracing::debug!(HPA = key, "d");
        tracing::debug!(v = 3, object = %format!("{}/{}", a, b), "e");
        tracing::trace!(v = 5, "f");
        tracing::trace!("g");
        crate::v!(6, "h {}", (1, 2));
        crate::v!(level, delay = ?d, "i");
    "#;
    let got: Vec<(String, String)> = calls_in(source)
        .into_iter()
        .map(|l| (l.message, l.level))
        .collect();
    let want = [
        ("a", "Error"),
        ("b {}", "Warning"),
        ("c", "V(1)"),
        ("d", "V(2)"),
        ("e", "V(3)"),
        ("f", "V(5)"),
        ("g", "V(4)"),
        ("h {}", "V(6)"),
        ("i", "V(n)"),
    ];
    assert_eq!(
        got,
        want.map(|(m, l)| (m.to_string(), l.to_string())).to_vec()
    );
}
