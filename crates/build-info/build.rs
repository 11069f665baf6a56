//! Stamps the build: the git commit and tree state of the checkout, the build date, the
//! compiler's version and the target platform, as `rustc-env` variables that `src/lib.rs`
//! reads with `env!`.
//!
//! The commit and tree state come from `KUBE_HPA_GIT_COMMIT` and `KUBE_HPA_GIT_TREE_STATE`
//! when set (a build without `.git`, e.g. the Dockerfile's), else from `git rev-parse HEAD`
//! and `git status --porcelain` (any output, untracked files included, is `dirty`, as
//! Kubernetes' `hack/lib/version.sh` decides), else `unknown`. The build date is
//! `SOURCE_DATE_EPOCH` when set (reproducible builds), else now, in UTC as
//! `YYYY-MM-DDTHH:MM:SSZ`.
//!
//! The stamp is taken again when HEAD, the branch it names, `packed-refs` or the index
//! change (a commit, a checkout, `git add`, or a `git status` that refreshed the index after
//! an edit), or one of the three variables changes; only this crate and the two binaries that
//! use it are rebuilt then.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "src/date.rs"]
mod date;

use date::rfc3339_utc;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    for var in [
        "KUBE_HPA_GIT_COMMIT",
        "KUBE_HPA_GIT_TREE_STATE",
        "SOURCE_DATE_EPOCH",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let git = Git::find();
    if let Some(git) = &git {
        git.watch();
    }
    let commit = override_var("KUBE_HPA_GIT_COMMIT")
        .or_else(|| git.as_ref().and_then(Git::commit))
        .unwrap_or_else(|| "unknown".to_string());
    let tree_state = override_var("KUBE_HPA_GIT_TREE_STATE")
        .or_else(|| git.as_ref().and_then(Git::tree_state))
        .unwrap_or_else(|| "unknown".to_string());
    let epoch = match override_var("SOURCE_DATE_EPOCH") {
        Some(v) => match v.parse::<i64>() {
            Ok(secs) => secs,
            Err(_) => {
                println!(
                    "cargo::warning=SOURCE_DATE_EPOCH={v:?} is not a number of seconds; using the current time"
                );
                now()
            }
        },
        None => now(),
    };
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let compiler_version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".to_string());
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let endian = std::env::var("CARGO_CFG_TARGET_ENDIAN").unwrap_or_default();

    emit("HPA_BUILD_GIT_COMMIT", &commit);
    emit("HPA_BUILD_GIT_TREE_STATE", &tree_state);
    emit("HPA_BUILD_DATE", &rfc3339_utc(epoch));
    emit("HPA_BUILD_RUSTC_VERSION", &compiler_version);
    emit(
        "HPA_BUILD_PLATFORM",
        &format!("{}/{}", go_os(&os), go_arch(&arch, &endian)),
    );
}

/// One `rustc-env` line; a value is one line (a newline would end the directive).
fn emit(name: &str, value: &str) {
    let value = value.replace(['\n', '\r'], " ");
    println!("cargo::rustc-env={name}={value}");
}

/// The variable's value when set and not blank.
fn override_var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The checkout this crate is built from, if it is one and `git` runs.
struct Git {
    /// The directory `git` runs in.
    dir: PathBuf,
    /// `.git` (or, in a worktree, its own directory under the main `.git/worktrees`).
    git_dir: PathBuf,
    /// Where the refs live (the main `.git` for a worktree).
    common_dir: PathBuf,
}

impl Git {
    fn find() -> Option<Git> {
        let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
        let git_dir = run_git(&dir, &["rev-parse", "--absolute-git-dir"])?;
        let common_dir = run_git(
            &dir,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )
        .unwrap_or_else(|| git_dir.clone());
        Some(Git {
            dir,
            git_dir: PathBuf::from(git_dir),
            common_dir: PathBuf::from(common_dir),
        })
    }

    /// Reruns the build script when HEAD moves: HEAD itself, the branch it names, the
    /// packed refs, and the index (a commit or `git add`). Files that do not exist are not
    /// named (cargo would rerun the script on every build).
    fn watch(&self) {
        let mut files = vec![
            self.git_dir.join("HEAD"),
            self.git_dir.join("index"),
            self.common_dir.join("packed-refs"),
        ];
        if let Some(reference) = run_git(&self.dir, &["symbolic-ref", "-q", "HEAD"]) {
            files.push(self.common_dir.join(reference));
        }
        for file in files.iter().filter(|f| f.is_file()) {
            println!("cargo::rerun-if-changed={}", file.display());
        }
    }

    fn commit(&self) -> Option<String> {
        run_git(&self.dir, &["rev-parse", "HEAD"])
    }

    fn tree_state(&self) -> Option<String> {
        let status = Command::new("git")
            .arg("-C")
            .arg(&self.dir)
            .args(["status", "--porcelain"])
            .output()
            .ok()
            .filter(|o| o.status.success())?;
        Some(if status.stdout.iter().all(u8::is_ascii_whitespace) {
            "clean".to_string()
        } else {
            "dirty".to_string()
        })
    }
}

/// `git -C dir ARGS`'s trimmed output when it succeeds with some.
fn run_git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// Go's `GOOS` for a Rust `target_os`.
fn go_os(os: &str) -> &str {
    match os {
        "macos" => "darwin",
        other => other,
    }
}

/// Go's `GOARCH` for a Rust `target_arch` (and endianness where Go's name depends on it).
fn go_arch<'a>(arch: &'a str, endian: &str) -> &'a str {
    match (arch, endian) {
        ("x86_64", _) => "amd64",
        ("x86", _) => "386",
        ("aarch64", _) => "arm64",
        ("powerpc64", "little") => "ppc64le",
        ("powerpc64", _) => "ppc64",
        ("loongarch64", _) => "loong64",
        ("mips64", "little") => "mips64le",
        ("mips", "little") => "mipsle",
        (other, _) => other,
    }
}
