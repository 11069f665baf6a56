//! `hpactl demo` (issue 7 item 6): the embedded scenario runs the real controller against the
//! simulated cluster, prints one line per decision with at least one scale-up and one
//! scale-down, and ends by itself (exit 0) within a bounded time.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn hpactl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hpactl"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running hpactl: {e}"))
}

/// `(current, desired)` of a decision line `TIME  NS/NAME  CURRENT → DESIRED  ...`.
fn replicas(line: &str) -> Option<(i32, i32)> {
    let mut words = line.split_whitespace();
    let time = words.next()?;
    let key = words.next()?;
    if time.len() != 5 || time.as_bytes()[2] != b':' || !key.contains('/') {
        return None;
    }
    let current = words.next()?.parse().ok()?;
    (words.next()? == "→").then_some(())?;
    let desired = words.next()?.parse().ok()?;
    Some((current, desired))
}

#[test]
fn the_embedded_demo_scales_up_and_down_and_ends_by_itself() {
    // The 40s timeline at 4x speed: about 10 seconds.
    let began = Instant::now();
    let out = hpactl(&["demo", "--speed", "4"]);
    let took = began.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(took < Duration::from_secs(30), "took {took:?}\n{stdout}");

    let decisions: Vec<(&str, (i32, i32))> = stdout
        .lines()
        .filter_map(|l| replicas(l).map(|r| (l, r)))
        .collect();
    assert!(decisions.len() >= 10, "{stdout}");
    assert!(
        decisions.iter().any(|(_, (c, d))| d > c),
        "no scale-up:\n{stdout}"
    );
    assert!(
        decisions.iter().any(|(_, (c, d))| d < c),
        "no scale-down:\n{stdout}"
    );
    // Scale-ups give upstream's rescale reason; both HPAs decide.
    assert!(
        decisions.iter().any(|(l, (c, d))| d > c
            && l.contains("cpu resource utilization (percentage of request) above target")),
        "{stdout}"
    );
    assert!(
        decisions
            .iter()
            .any(|(l, (c, d))| d < c && l.contains("All metrics below target")),
        "{stdout}"
    );
    for hpa in ["default/web", "default/api"] {
        assert!(
            decisions.iter().any(|(l, _)| l.contains(hpa)),
            "{hpa} never decided:\n{stdout}"
        );
    }
    // The load the scenario sets is announced, and the run ends with its summary.
    assert!(
        stdout.contains("load on deployment default/web: 700m CPU in total (was 190m)"),
        "{stdout}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    assert!(last.starts_with("done: "), "{stdout}");
}

#[test]
fn the_demo_scenario_is_a_valid_scenario_file() {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../test-fixtures/demo/demo.yaml");
    let out = hpactl(&["replay", "--check", &file.display().to_string()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bad_options_exit_two() {
    let out = hpactl(&["demo", "--speed", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "--speed 0: must be between 0.1 and 100\n"
    );
    let out = hpactl(&["demo", "--sync-period", "0s"]);
    assert_eq!(out.status.code(), Some(2));
    let out = hpactl(&["demo", "/nonexistent/demo.yaml"]);
    assert_eq!(out.status.code(), Some(2));
}
