// The `kubectl` probe shared by the build scripts of the crates whose tests run kubectl
// (`crates/fixtures/build.rs`, `cmd/kube-hpa-controller/build.rs`, `cmd/hpactl/build.rs`),
// included with `include!`.

use std::path::{Path, PathBuf};

/// Sets the `has_kubectl` cfg when `KUBECTL` names an executable file or an executable
/// `kubectl` is on `PATH`, and `HPA_TEST_KUBECTL` to its path (empty if none); reruns when
/// `KUBECTL`, `PATH` or the build script changes.
fn probe_kubectl() {
    println!("cargo::rustc-check-cfg=cfg(has_kubectl)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=../../hack/build/kubectl_probe.rs");
    println!("cargo::rerun-if-env-changed=PATH");
    println!("cargo::rerun-if-env-changed=KUBECTL");
    let kubectl = std::env::var_os("KUBECTL")
        .map(PathBuf::from)
        .filter(|p| is_executable(p))
        .or_else(|| find_on_path("kubectl"));
    let kubectl = kubectl
        .as_deref()
        .and_then(Path::to_str)
        .unwrap_or_default();
    if !kubectl.is_empty() {
        println!("cargo::rustc-cfg=has_kubectl");
    }
    println!("cargo::rustc-env=HPA_TEST_KUBECTL={kubectl}");
}

/// The first executable file named `name` in a directory of `PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let file = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(&file))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}
