//! For integration tests that run another package's binary: included with `#[path]` by
//! `cmd/kube-hpa-controller/tests/common/mod.rs` (which runs `hpactl`) and
//! `cmd/hpactl/tests/record.rs` (which runs `kube-hpa-controller`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The binary of package `package` (named as it) in the directory of `next_to`, this
/// package's own binary: `cargo test --workspace` built it there; built once with Cargo (into
/// the same target and profile directory) when only this package was built.
pub fn sibling_binary(next_to: &str, package: &str) -> PathBuf {
    let bin_dir = Path::new(next_to).parent().unwrap();
    let path = bin_dir.join(format!("{package}{}", std::env::consts::EXE_SUFFIX));
    if path.exists() {
        return path;
    }
    eprintln!(
        "{} is missing: building it with `cargo build -p {package}`",
        path.display()
    );
    // `<target dir>/<profile dir>/`, where the `dev` profile's directory is `debug`.
    let profile = match bin_dir.file_name().unwrap().to_str().unwrap() {
        "debug" => "dev",
        other => other,
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "-p", package, "--profile", profile, "--target-dir"])
        .arg(bin_dir.parent().unwrap())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(status.success(), "cargo build -p {package} failed");
    assert!(
        path.exists(),
        "{} still missing after the build",
        path.display()
    );
    path
}
