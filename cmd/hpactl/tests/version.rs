//! `hpactl --version` and `--version=raw` print the build stamp (hpa-build-info) and exit 0.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_hpactl"))
        .args(args)
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn version_prints_the_stamp() {
    let (code, text) = run(&["--version"]);
    assert_eq!(code, Some(0));
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(format!("hpactl v{}", env!("CARGO_PKG_VERSION")).as_str())
    );
    let commit_line = lines.next().unwrap();
    assert!(lines.next().is_none(), "{text}");
    let commit = commit_line
        .strip_prefix("git commit: ")
        .and_then(|l| l.split_once(' '))
        .map(|(c, _)| c)
        .unwrap_or_else(|| panic!("{text}"));
    if std::env::var_os("KUBE_HPA_GIT_COMMIT").is_none()
        && let Ok(o) = Command::new("git")
            .args(["-C", env!("CARGO_MANIFEST_DIR"), "rev-parse", "HEAD"])
            .output()
        && o.status.success()
    {
        assert_eq!(commit, String::from_utf8_lossy(&o.stdout).trim());
    }

    let (code, raw) = run(&["--version=raw"]);
    assert_eq!(code, Some(0));
    assert!(raw.starts_with("version.Info{Major:\""), "{raw}");
    assert!(
        raw.contains(&format!(
            "GitVersion:\"v{}\", GitCommit:\"{commit}\"",
            env!("CARGO_PKG_VERSION")
        )),
        "{raw}"
    );
    assert!(raw.contains("Compiler:\"rustc\""), "{raw}");

    // Without a subcommand or --version: a usage error.
    let (code, _) = run(&[]);
    assert_eq!(code, Some(2));
    let (code, _) = run(&["--version=nope"]);
    assert_eq!(code, Some(2));
}
