//! `hpactl` as the kubectl plugins `kubectl-hpa_explain` and `kubectl-hpa_simulate`: a link of
//! the built binary under the plugin's name is the subcommand, with help naming the kubectl
//! command; and kubectl itself dispatches `kubectl hpa-explain` to it (ignored, with the
//! reason, where `build.rs` found no kubectl: `KUBECTL`, else `PATH`).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A directory under Cargo's per-target temporary directory holding links to the built
/// `hpactl` under the plugins' names; removed on drop.
struct PluginDir(PathBuf);

impl PluginDir {
    fn new(tag: &str) -> PluginDir {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("hpactl-plugin-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["kubectl-hpa_explain", "kubectl-hpa_simulate"] {
            link(Path::new(env!("CARGO_BIN_EXE_hpactl")), &dir.join(name));
        }
        PluginDir(dir)
    }

    fn plugin(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for PluginDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(unix)]
fn link(from: &Path, to: &Path) {
    std::os::unix::fs::symlink(from, to).unwrap();
}

#[cfg(not(unix))]
fn link(from: &Path, to: &Path) {
    std::fs::copy(from, to.with_extension("exe")).unwrap();
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn the_plugin_names_run_their_subcommands() {
    let dir = PluginDir::new("names");
    let o = Command::new(dir.plugin("kubectl-hpa_explain"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let help = stdout(&o);
    assert!(
        help.contains("Usage: kubectl hpa-explain [OPTIONS] <NAMESPACE/NAME>"),
        "{help}"
    );
    assert!(help.contains("--controller <https://HOST:PORT>"), "{help}");

    let o = Command::new(dir.plugin("kubectl-hpa_simulate"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let help = stdout(&o);
    assert!(
        help.contains("Usage: kubectl hpa-simulate [OPTIONS] --out <DIR> <FILE>"),
        "{help}"
    );

    // A usage error names the plugin too, and exits 2 as clap does.
    let o = Command::new(dir.plugin("kubectl-hpa_explain"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("kubectl hpa-explain"), "{err}");

    // The plugin's arguments are explain's: a name that is no HPA key is refused.
    let o = Command::new(dir.plugin("kubectl-hpa_explain"))
        .arg("a/b/c")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
}

/// kubectl finds `kubectl-hpa_explain` on `PATH` and runs it for `kubectl hpa-explain`.
#[test]
#[cfg_attr(not(has_kubectl), ignore = "kubectl not found (KUBECTL, PATH)")]
fn kubectl_dispatches_hpa_explain_to_the_plugin() {
    let kubectl = env!("HPA_TEST_KUBECTL");
    let dir = PluginDir::new("kubectl");
    let path = std::env::join_paths(std::iter::once(dir.0.clone()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let o = Command::new(kubectl)
        .args(["hpa-explain", "--help"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{o:?}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let help = stdout(&o);
    assert!(
        help.contains("Usage: kubectl hpa-explain [OPTIONS] <NAMESPACE/NAME>"),
        "kubectl did not run the plugin:\n{help}"
    );
}
