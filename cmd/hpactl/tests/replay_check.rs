//! `hpactl replay --check`: valid files exit 0, the first invalid file exits 2 with a message
//! naming the file, the step and the key (docs/scenario-format.md, "Results").

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn scenarios_dir() -> PathBuf {
    manifest_dir().join("../../test-fixtures/scenarios")
}

fn data(rel: &str) -> PathBuf {
    manifest_dir().join("tests/data").join(rel)
}

fn hpactl(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hpactl"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running hpactl: {e}"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn valid_directory_exits_zero() {
    let out = hpactl(&[Path::new("replay"), Path::new("--check"), &scenarios_dir()]);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("OK cpu-utilization-scale-up "), "{stdout}");
}

#[test]
fn invalid_file_exits_two_naming_file_step_and_key() {
    let file = data("invalid/fault-status.yaml");
    let out = hpactl(&[Path::new("replay"), Path::new("--check"), &file]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        stderr(&out),
        format!(
            "{}: steps[2].faults[0]: status: must be an HTTP error code (400-599), got 200\n",
            file.display()
        )
    );
}

#[test]
fn each_invalid_example_is_rejected() {
    let cases = [
        (
            "invalid/at-decreasing.yaml",
            "steps[1]: at: must not be smaller than the previous step's (30s < 1m0s)",
        ),
        (
            "invalid/unknown-expect-key.yaml",
            "steps[0].expect: replicas: unknown key",
        ),
        (
            "invalid/object-without-name.yaml",
            "objects[0]: metadata.name: required key is missing",
        ),
    ];
    for (rel, want) in cases {
        let file = data(rel);
        let out = hpactl(&[Path::new("replay"), Path::new("--check"), &file]);
        assert_eq!(out.status.code(), Some(2), "{rel}");
        let err = stderr(&out);
        assert!(
            err.starts_with(&format!("{}: {want}", file.display())),
            "{rel}: {err}"
        );
    }
}

#[test]
fn a_valid_directory_with_an_invalid_file_exits_two() {
    let out = hpactl(&[
        Path::new("replay"),
        Path::new("--check"),
        &scenarios_dir(),
        &data("invalid"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    // Directory contents are sorted: the first invalid file is reported.
    assert!(stderr(&out).contains("invalid/at-decreasing.yaml: steps[1]: at:"));
}

#[test]
fn duplicate_names_are_rejected() {
    let out = hpactl(&[
        Path::new("replay"),
        Path::new("--check"),
        &data("duplicate"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("b.yaml: name: duplicate scenario name \"same-name\""),
        "{}",
        stderr(&out)
    );
}

#[test]
fn missing_path_exits_two() {
    let out = hpactl(&[
        Path::new("replay"),
        Path::new("--check"),
        &data("no-such-file.yaml"),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no-such-file.yaml: cannot read"));
}
