//! What a binary of this workspace was built from: the version, the git commit and tree state,
//! the build date, the compiler and the platform, stamped by this crate's `build.rs`.
//!
//! Mirrors `k8s.io/component-base/version` (`version.Get()` and the `apimachinery`
//! `version.Info` it returns), which kube-controller-manager prints for `--version` and exports
//! as `kubernetes_build_info`. Both `kube-hpa-controller` and `hpactl` read [`BUILD_INFO`], so
//! what `--version` prints and what `/metrics` exports come from one stamp.
//!
//! Differences from Kubernetes' fields: `go_version` is the Rust compiler's version
//! (`rustc --version`, e.g. `rustc 1.95.0 (59807616e 2026-04-14)`) and `compiler` is `rustc`;
//! `git_version` is `v` and the workspace version (no `-dirty` or commit suffix: the tree
//! state and commit have fields of their own); the emulation and minimum-compatibility fields
//! of `version.Info` are left out (this binary has no binary version to emulate from).
//!
//! The stamp is a separate crate so that re-stamping (a new commit, `git add`) rebuilds only
//! this crate and the two binaries, never the libraries under them.

#[cfg(test)]
mod date;

/// The build's identity, as Kubernetes' `version.Info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildInfo {
    /// The workspace version's major number (`0`).
    pub major: &'static str,
    /// The workspace version's minor number (`1`).
    pub minor: &'static str,
    /// `v` and the workspace version (`v0.1.0`).
    pub git_version: &'static str,
    /// The commit built (`git rev-parse HEAD`, `KUBE_HPA_GIT_COMMIT`, or `unknown`).
    pub git_commit: &'static str,
    /// `clean`, `dirty` (`git status --porcelain`), `KUBE_HPA_GIT_TREE_STATE`, or `unknown`.
    pub git_tree_state: &'static str,
    /// When it was built (`SOURCE_DATE_EPOCH` if set), `YYYY-MM-DDTHH:MM:SSZ`.
    pub build_date: &'static str,
    /// The compiler's version (`rustc --version`), in the field Kubernetes fills with Go's.
    pub go_version: &'static str,
    /// `rustc`.
    pub compiler: &'static str,
    /// `OS/ARCH` in Go's names (`linux/amd64`, `darwin/arm64`).
    pub platform: &'static str,
}

/// This build's stamp.
pub const BUILD_INFO: BuildInfo = BuildInfo {
    major: env!("CARGO_PKG_VERSION_MAJOR"),
    minor: env!("CARGO_PKG_VERSION_MINOR"),
    git_version: concat!("v", env!("CARGO_PKG_VERSION")),
    git_commit: env!("HPA_BUILD_GIT_COMMIT"),
    git_tree_state: env!("HPA_BUILD_GIT_TREE_STATE"),
    build_date: env!("HPA_BUILD_DATE"),
    go_version: env!("HPA_BUILD_RUSTC_VERSION"),
    compiler: "rustc",
    platform: env!("HPA_BUILD_PLATFORM"),
};

/// The label names of `kubernetes_build_info`, in component-base's order.
pub const METRIC_LABELS: [&str; 9] = [
    "major",
    "minor",
    "git_version",
    "git_commit",
    "git_tree_state",
    "build_date",
    "go_version",
    "compiler",
    "platform",
];

impl BuildInfo {
    /// The values of `kubernetes_build_info`'s labels, in [`METRIC_LABELS`]' order.
    pub fn metric_values(&self) -> [&'static str; 9] {
        [
            self.major,
            self.minor,
            self.git_version,
            self.git_commit,
            self.git_tree_state,
            self.build_date,
            self.go_version,
            self.compiler,
            self.platform,
        ]
    }

    /// What `--version` prints: the program and its version (kube-controller-manager prints
    /// `Kubernetes v1.37.2`), then the commit and tree state on a line of their own.
    pub fn version_text(&self, program: &str) -> String {
        format!(
            "{program} {}\ngit commit: {} ({})\n",
            self.git_version, self.git_commit, self.git_tree_state
        )
    }

    /// What `--version=raw` prints: every field on one line, as Go's `%#v` prints
    /// kube-controller-manager's `version.Info`.
    pub fn raw_text(&self) -> String {
        let fields = [
            ("Major", self.major),
            ("Minor", self.minor),
            ("GitVersion", self.git_version),
            ("GitCommit", self.git_commit),
            ("GitTreeState", self.git_tree_state),
            ("BuildDate", self.build_date),
            ("GoVersion", self.go_version),
            ("Compiler", self.compiler),
            ("Platform", self.platform),
        ];
        let body = fields
            .iter()
            .map(|(name, value)| format!("{name}:{}", hpa_config::strconv::quote(value)))
            .collect::<Vec<_>>()
            .join(", ");
        format!("version.Info{{{body}}}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: BuildInfo = BuildInfo {
        major: "0",
        minor: "1",
        git_version: "v0.1.0",
        git_commit: "0123456789abcdef0123456789abcdef01234567",
        git_tree_state: "clean",
        build_date: "2026-01-02T03:04:05Z",
        go_version: "rustc 1.95.0 (59807616e 2026-04-14)",
        compiler: "rustc",
        platform: "linux/amd64",
    };

    #[test]
    fn version_text_names_the_program_version_and_commit() {
        assert_eq!(
            SAMPLE.version_text("kube-hpa-controller"),
            "kube-hpa-controller v0.1.0\ngit commit: 0123456789abcdef0123456789abcdef01234567 (clean)\n"
        );
    }

    #[test]
    fn raw_text_is_go_struct_syntax() {
        assert_eq!(
            SAMPLE.raw_text(),
            concat!(
                r#"version.Info{Major:"0", Minor:"1", GitVersion:"v0.1.0", "#,
                r#"GitCommit:"0123456789abcdef0123456789abcdef01234567", GitTreeState:"clean", "#,
                r#"BuildDate:"2026-01-02T03:04:05Z", GoVersion:"rustc 1.95.0 (59807616e 2026-04-14)", "#,
                r#"Compiler:"rustc", Platform:"linux/amd64"}"#,
                "\n"
            )
        );
        assert_eq!(
            hpa_config::strconv::quote("a\"b\\c\n\u{1}"),
            r#""a\"b\\c\n\x01""#
        );
    }

    #[test]
    fn this_build_is_stamped() {
        let b = BUILD_INFO;
        assert_eq!(b.git_version, concat!("v", env!("CARGO_PKG_VERSION")));
        assert_eq!(format!("v{}.{}.", b.major, b.minor), {
            let v = b.git_version;
            v[..=v.rfind('.').unwrap()].to_string()
        });
        assert!(!b.git_commit.is_empty());
        assert!(
            ["clean", "dirty", "unknown"].contains(&b.git_tree_state)
                || std::env::var_os("KUBE_HPA_GIT_TREE_STATE").is_some(),
            "{}",
            b.git_tree_state
        );
        assert_eq!(b.build_date.len(), "2026-01-02T03:04:05Z".len());
        assert!(b.build_date.ends_with('Z'));
        assert!(b.go_version.starts_with("rustc "), "{}", b.go_version);
        let (os, arch) = b.platform.split_once('/').unwrap();
        assert_eq!(os, std::env::consts::OS.replace("macos", "darwin"));
        assert!(!arch.is_empty());
        assert_eq!(b.metric_values()[3], b.git_commit);
    }
}
