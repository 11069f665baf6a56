//! `hpactl simulate`: the worked example runs and writes both outputs; `--compare` adds the
//! variant's rows; a bad file exits 2 naming the file, the line and the key
//! (docs/simulate-format.md).

use std::path::PathBuf;
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn hpactl(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hpactl"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running hpactl: {e}"))
}

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hpactl-simulate-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn example_writes_csv_and_svg_and_compares() {
    let example = repo().join("docs/examples/simulate.yaml");
    let dir = out_dir("example");
    let out = hpactl(&[
        "simulate".as_ref(),
        example.as_os_str(),
        "-o".as_ref(),
        dir.as_os_str(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(dir.join("simulation.csv"))
        .unwrap_or_else(|e| panic!("reading the CSV: {e}"));
    // Two hours at 15 s: 481 syncs.
    assert_eq!(csv.lines().count(), 1 + 481);
    // The spike at 45m asks for more than the policy's 4 pods a minute allows.
    assert!(csv.contains(",true,cpu resource utilization (percentage of request) above target,SucceededRescale,ScaleUpLimit,,0,0\n"), "{csv}");
    let svg = std::fs::read_to_string(dir.join("simulation.svg"))
        .unwrap_or_else(|e| panic!("reading the SVG: {e}"));
    assert!(svg.starts_with("<svg") && svg.contains("shop/web"));

    let other = dir.join("other.yaml");
    let variant = std::fs::read_to_string(&example)
        .unwrap_or_else(|e| panic!("{e}"))
        .split("\nload:")
        .next()
        .unwrap_or_default()
        .replace("duration: 2h\n", "")
        .replace(
            "workload:\n  replicas: 3\n  requests:\n    cpu: 500m\n  readyAfter: 45s\n",
            "",
        )
        .replace("averageUtilization: 60", "averageUtilization: 80");
    std::fs::write(&other, variant).unwrap_or_else(|e| panic!("{e}"));
    let dir2 = out_dir("compare");
    let out = hpactl(&[
        "simulate".as_ref(),
        example.as_os_str(),
        "-o".as_ref(),
        dir2.as_os_str(),
        "--compare".as_ref(),
        other.as_os_str(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(dir2.join("simulation.csv"))
        .unwrap_or_else(|e| panic!("reading the CSV: {e}"));
    assert_eq!(csv.lines().filter(|l| l.starts_with("base,")).count(), 481);
    assert_eq!(
        csv.lines().filter(|l| l.starts_with("compare,")).count(),
        481
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&dir2);
}

#[test]
fn bad_file_exits_two_naming_file_line_and_key() {
    let dir = out_dir("bad");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let example = std::fs::read_to_string(repo().join("docs/examples/simulate.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        example.replace("readyAfter: 45s", "readyAfter: 45 seconds"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let line = example
        .lines()
        .position(|l| l.contains("readyAfter"))
        .map_or(0, |i| i + 1);
    let out = hpactl(&[
        "simulate".as_ref(),
        bad.as_os_str(),
        "-o".as_ref(),
        dir.join("out").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let expected = format!(
        "{}:{line}: workload.readyAfter: must be a duration",
        bad.display()
    );
    assert!(stderr.starts_with(&expected), "{stderr}");
    assert!(!dir.join("out").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// README's chart is what `hpactl simulate docs/examples/simulate.yaml` draws today.
#[test]
fn committed_example_chart_is_current() {
    let dir = out_dir("chart");
    let out = Command::new(env!("CARGO_BIN_EXE_hpactl"))
        .current_dir(repo())
        .args(["simulate", "docs/examples/simulate.yaml", "-o"])
        .arg(&dir)
        .output()
        .unwrap_or_else(|e| panic!("running hpactl: {e}"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let drawn = std::fs::read_to_string(dir.join("simulation.svg"))
        .unwrap_or_else(|e| panic!("reading the SVG: {e}"));
    let committed = std::fs::read_to_string(repo().join("docs/examples/simulate.svg"))
        .unwrap_or_else(|e| panic!("reading docs/examples/simulate.svg: {e}"));
    assert!(
        drawn == committed,
        "docs/examples/simulate.svg is stale: regenerate it with \
         `hpactl simulate docs/examples/simulate.yaml -o DIR` and copy DIR/simulation.svg"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
