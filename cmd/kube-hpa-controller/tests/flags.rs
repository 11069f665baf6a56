//! Runs the built binary the way an operator does: bad flags exit 2 with one line naming the
//! flag; `--help` and `--version` exit 0; a kubeconfig that cannot be read stops start-up
//! with a clear error.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kube-hpa-controller"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_values_exit_2_with_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--horizontal-pod-autoscaler-tolerance=abc"],
            r#"Error: invalid argument "abc" for "--horizontal-pod-autoscaler-tolerance" flag: strconv.ParseFloat: parsing "abc": invalid syntax"#,
        ),
        (
            &["--concurrent-horizontal-pod-autoscaler-syncs=0"],
            "Error: concurrent-horizontal-pod-autoscaler-syncs must be greater than 0, but got 0",
        ),
        (
            &["--horizontal-pod-autoscaler-sync-period=15"],
            r#"Error: invalid argument "15" for "--horizontal-pod-autoscaler-sync-period" flag: time: missing unit in duration "15""#,
        ),
        (
            &[
                "--leader-elect-renew-deadline=20s",
                "--leader-elect-lease-duration=15s",
            ],
            "Error: --leader-elect-renew-deadline: leaseDuration must be greater than renewDeadline (lease duration 15s, renew deadline 20s)",
        ),
        (
            &["--feature-gates=Nope=true"],
            r#"Error: invalid argument "Nope=true" for "--feature-gates" flag: unrecognized feature gate: Nope"#,
        ),
        (
            &["--controllers=*,-garbagecollector"],
            r#"Error: --controllers: "garbagecollector" is not in the list of known controllers"#,
        ),
        (&["--no-such-flag"], "Error: unknown flag: --no-such-flag"),
        // Version selection (docs/versions.md): component-base's words.
        (
            &["--emulated-version=1.34"],
            "Error: --emulated-version: emulation version 1.34 is not between [1.35, 1.37]",
        ),
        (
            &[
                "--emulated-version=1.37",
                "--feature-gates=HPAConfigurableTolerance=false",
            ],
            "Error: --feature-gates: cannot set feature gate HPAConfigurableTolerance to false, feature is locked to true",
        ),
        (
            &[
                "--emulated-version=1.35",
                "--feature-gates=StaleControllerConsistencyHPA=true",
            ],
            "Error: --feature-gates: cannot set feature gate StaleControllerConsistencyHPA to true, feature is PreAlpha at emulated version 1.35",
        ),
    ];
    for (args, want) in cases {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "exit status for {args:?}");
        assert_eq!(stderr(&o), format!("{want}\n"), "stderr for {args:?}");
        assert!(o.stdout.is_empty(), "nothing on stdout for {args:?}");
    }
}

#[test]
fn help_and_version_exit_0() {
    let o = run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(help.contains("--horizontal-pod-autoscaler-sync-period <duration>"));
    assert!(help.contains("[default: 5m0s]"));
}

/// `git rev-parse HEAD` of this checkout, when it is one and the build was not given the
/// commit by `KUBE_HPA_GIT_COMMIT`.
fn checkout_commit() -> Option<String> {
    if std::env::var_os("KUBE_HPA_GIT_COMMIT").is_some() {
        return None;
    }
    let o = Command::new("git")
        .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// `--version` prints the version and the commit, `--version=raw` every build field, as
/// kube-controller-manager's `verflag` does; nothing starts (no kubeconfig is read), even
/// next to an invalid flag value; `--version=false` runs.
#[test]
fn version_prints_the_build_and_exits_0() {
    let o = run(&["--version", "--kubeconfig=/nonexistent/kubeconfig"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(o.stderr.is_empty(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(
        lines[0],
        format!("kube-hpa-controller v{}", env!("CARGO_PKG_VERSION"))
    );
    let (commit, state) = lines[1]
        .strip_prefix("git commit: ")
        .and_then(|l| l.strip_suffix(')'))
        .and_then(|l| l.split_once(" ("))
        .unwrap_or_else(|| panic!("{text}"));
    if let Some(head) = checkout_commit() {
        assert_eq!(commit, head);
        assert!(["clean", "dirty"].contains(&state), "{text}");
    }

    let o = run(&[
        "--concurrent-horizontal-pod-autoscaler-syncs=0",
        "--version=raw",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let raw = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(raw.lines().count(), 1, "{raw}");
    let fields = common::raw_fields(&raw);
    let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "Major",
            "Minor",
            "GitVersion",
            "GitCommit",
            "GitTreeState",
            "BuildDate",
            "GoVersion",
            "Compiler",
            "Platform"
        ]
    );
    let field = |n: &str| fields.iter().find(|(k, _)| k == n).unwrap().1.as_str();
    assert_eq!(
        field("GitVersion"),
        format!("v{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(field("Major"), env!("CARGO_PKG_VERSION_MAJOR"));
    assert_eq!(field("Minor"), env!("CARGO_PKG_VERSION_MINOR"));
    assert_eq!(field("GitCommit"), commit);
    assert_eq!(field("GitTreeState"), state);
    assert_eq!(field("Compiler"), "rustc");
    assert!(field("GoVersion").starts_with("rustc 1."), "{raw}");
    assert_eq!(
        field("Platform"),
        format!(
            "{}/{}",
            std::env::consts::OS,
            std::env::consts::ARCH
                .replace("x86_64", "amd64")
                .replace("aarch64", "arm64")
        )
    );

    // --version=false runs: here it stops at the kubeconfig.
    let o = run(&["--version=false", "--kubeconfig=/nonexistent/kubeconfig"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn deprecated_flag_is_accepted_and_announced_once() {
    let o = run(&[
        "--horizontal-pod-autoscaler-upscale-delay=1m",
        "--horizontal-pod-autoscaler-upscale-delay=2m",
        "--kubeconfig=/nonexistent/kubeconfig",
    ]);
    let err = stderr(&o);
    let notice = "Flag --horizontal-pod-autoscaler-upscale-delay has been deprecated, This flag is currently no-op and will be deleted.";
    assert_eq!(err.matches(notice).count(), 1, "{err}");
    assert_ne!(
        o.status.code(),
        Some(2),
        "a deprecated flag is not an error"
    );
}

#[test]
fn bad_kubeconfig_is_a_clear_error_and_non_zero_exit() {
    let o = run(&[
        "--kubeconfig=/nonexistent/kubeconfig",
        "--leader-elect=false",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("Error: invalid --kubeconfig \"/nonexistent/kubeconfig\""),
        "{err}"
    );
}
