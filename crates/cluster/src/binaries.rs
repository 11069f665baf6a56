//! Where upstream's binaries are: the cache `hack/kube.sh build VERSION` fills.
//!
//! The layout is `hack/kube.sh`'s: `$KUBE_HPA_CACHE/kube/vX.Y.Z/bin/{kube-apiserver,
//! kube-controller-manager,kubectl,etcd}`, `KUBE_HPA_CACHE` defaulting to
//! `${XDG_CACHE_HOME:-~/.cache}/kube-hpa-controller`, and a build counts only once its
//! `.complete` mark exists (the script writes it last). `KUBE_HPA_BIN_DIR` points at another
//! directory holding the four binaries instead.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A Kubernetes release, `1.MINOR.PATCH`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct KubeRelease {
    /// The minor version.
    pub minor: u32,
    /// The patch version.
    pub patch: u32,
}

/// The versions this project is tested against (`hack/kube.sh versions`).
pub const TESTED_RELEASES: [KubeRelease; 3] = [
    KubeRelease {
        minor: 35,
        patch: 4,
    },
    KubeRelease {
        minor: 36,
        patch: 3,
    },
    KubeRelease {
        minor: 37,
        patch: 2,
    },
];

/// A version that is not `1.MINOR.PATCH`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a Kubernetes version of the form 1.MINOR.PATCH (for example 1.37.2)")]
pub struct ParseReleaseError(pub String);

impl FromStr for KubeRelease {
    type Err = ParseReleaseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseReleaseError(s.to_string());
        let rest = s.strip_prefix('v').unwrap_or(s);
        let mut parts = rest.split('.');
        let (Some("1"), Some(minor), Some(patch), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(err());
        };
        let num = |p: &str| {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 4 {
                Err(err())
            } else {
                p.parse::<u32>().map_err(|_| err())
            }
        };
        Ok(KubeRelease {
            minor: num(minor)?,
            patch: num(patch)?,
        })
    }
}

impl TryFrom<String> for KubeRelease {
    type Error = ParseReleaseError;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<KubeRelease> for String {
    fn from(r: KubeRelease) -> String {
        r.to_string()
    }
}

impl fmt::Display for KubeRelease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}.{}", self.minor, self.patch)
    }
}

/// The four binaries of a version.
#[derive(Debug, Clone)]
pub struct KubeBinaries {
    /// The release.
    pub release: KubeRelease,
    /// The directory holding them.
    pub dir: PathBuf,
}

/// Why the binaries are not there.
#[derive(Debug, thiserror::Error)]
pub enum BinariesError {
    /// The version was never built (or its build did not finish).
    #[error(
        "kube-apiserver, kube-controller-manager, kubectl and etcd {release} are not built in {dir} \
         (run: hack/kube.sh build {release})"
    )]
    NotBuilt {
        /// The release.
        release: KubeRelease,
        /// Where they were looked for.
        dir: PathBuf,
    },
    /// `KUBE_HPA_BIN_DIR` lacks one.
    #[error("KUBE_HPA_BIN_DIR={dir}: {binary} is missing or not executable")]
    Missing {
        /// The directory.
        dir: PathBuf,
        /// The binary.
        binary: &'static str,
    },
    /// Neither `KUBE_HPA_CACHE`, `XDG_CACHE_HOME` nor `HOME` is set.
    #[error("no cache directory: set KUBE_HPA_CACHE (or HOME)")]
    NoCacheDir,
}

/// The binaries' names.
pub const BINARIES: [&str; 4] = [
    "kube-apiserver",
    "kube-controller-manager",
    "kubectl",
    "etcd",
];

/// `$KUBE_HPA_CACHE`, else `${XDG_CACHE_HOME:-$HOME/.cache}/kube-hpa-controller`.
pub fn cache_root() -> Result<PathBuf, BinariesError> {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(c) = non_empty("KUBE_HPA_CACHE") {
        return Ok(PathBuf::from(c));
    }
    let base = match non_empty("XDG_CACHE_HOME") {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(non_empty("HOME").ok_or(BinariesError::NoCacheDir)?).join(".cache"),
    };
    Ok(base.join("kube-hpa-controller"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl KubeBinaries {
    /// The completed build of `release` (or `KUBE_HPA_BIN_DIR`).
    pub fn locate(release: KubeRelease) -> Result<Self, BinariesError> {
        if let Some(dir) = std::env::var_os("KUBE_HPA_BIN_DIR").filter(|v| !v.is_empty()) {
            let dir = PathBuf::from(dir);
            for binary in BINARIES {
                if !is_executable(&dir.join(binary)) {
                    return Err(BinariesError::Missing { dir, binary });
                }
            }
            return Ok(KubeBinaries { release, dir });
        }
        let version_dir = cache_root()?.join("kube").join(format!("v{release}"));
        let dir = version_dir.join("bin");
        let complete = version_dir.join(".complete").is_file()
            && BINARIES.iter().all(|b| is_executable(&dir.join(b)));
        if !complete {
            return Err(BinariesError::NotBuilt { release, dir });
        }
        Ok(KubeBinaries { release, dir })
    }

    /// The path of one binary.
    pub fn path(&self, binary: &str) -> PathBuf {
        self.dir.join(binary)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_releases() {
        let r: KubeRelease = "1.37.2".parse().unwrap();
        assert_eq!((r.minor, r.patch), (37, 2));
        assert_eq!(
            "v1.35.4".parse::<KubeRelease>().unwrap().to_string(),
            "1.35.4"
        );
        for bad in ["1.37", "2.0.1", "v1.37.2.1", "1.x.2", "", "1.37.-1", "1..2"] {
            assert!(bad.parse::<KubeRelease>().is_err(), "{bad}");
        }
    }

    #[test]
    fn an_unbuilt_version_names_the_build_command() {
        let e = KubeBinaries::locate(KubeRelease {
            minor: 99,
            patch: 0,
        });
        if std::env::var_os("KUBE_HPA_BIN_DIR").is_none() {
            let msg = e.unwrap_err().to_string();
            assert!(msg.contains("hack/kube.sh build 1.99.0"), "{msg}");
        }
    }
}
