//! `hpactl replay` running scenarios: per-scenario PASS/FAIL lines, the failure detail, the
//! closing `N passed, M failed` line, and exit status 0, 1 or 2 (docs/scenario-format.md,
//! "Results").

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn hpactl(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hpactl"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running hpactl: {e}"))
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_format_example_passes() {
    let file =
        manifest_dir().join("../../test-fixtures/scenarios/resource/cpu-utilization-scale-up.yaml");
    let out = hpactl(&[Path::new("replay"), &file]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        "PASS cpu-utilization-scale-up\n1 passed, 0 failed\n"
    );
}

#[test]
fn a_failure_names_step_expectation_expected_and_actual_and_exits_one() {
    // One ready pod at 100m of a 100m request against 50%: ratio 2, ceil(2 x 1) = 2, which is
    // the current count, so no scale write; the file expects one to 5. The passing example
    // runs after the failing one.
    let example =
        manifest_dir().join("../../test-fixtures/scenarios/resource/cpu-utilization-scale-up.yaml");
    let file = manifest_dir().join("tests/data/run/wrong-expectation.yaml");
    let out = hpactl(&[Path::new("replay"), &file, &example]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert_eq!(
        stdout(&out),
        "FAIL wrong-expectation\n  step 0: expect.scale\n    expected: [\"apps/v1/deployments/default/web -> 5\"]\n    actual:   []\nPASS cpu-utilization-scale-up\n1 passed, 1 failed\n"
    );
}

#[test]
fn invalid_flags_exit_two_naming_the_file_and_key() {
    let file = manifest_dir().join("tests/data/run/bad-flag.yaml");
    let out = hpactl(&[Path::new("replay"), &file]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!("{}: flags: ", file.display())),
        "{err}"
    );
    assert!(err.contains("horizontal-pod-autoscaler-tolerance"), "{err}");
    assert_eq!(stdout(&out), "");
}

#[test]
fn a_gate_locked_at_the_servers_version_exits_two() {
    // serverVersion 1.37 makes the controller 1.37, where HPAConfigurableTolerance is locked on.
    let file = manifest_dir().join("tests/data/run/tolerance-locked-on-1-37-server.yaml");
    let out = hpactl(&[Path::new("replay"), &file]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err,
        format!(
            "{}: flags: --feature-gates: cannot set feature gate HPAConfigurableTolerance to false, feature is locked to true\n",
            file.display()
        )
    );
}
