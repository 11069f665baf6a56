//! Which kube-controller-manager release this controller behaves as: 1.35, 1.36 or 1.37.
//!
//! Mirrors component-base's `--emulated-version` flag (`compatibility.ComponentGlobalsRegistry`:
//! `toVersionMap`, `effectiveVersion.Validate`) for the `kube` component, and
//! apimachinery's `version.Info` (`GET /version`) for the default: with no flag, the version
//! is the API server's minor, clamped into the supported range with a warning (an upstream
//! KCM is always its own binary's version; this one follows the cluster it runs against).
//! `docs/versions.md` lists what differs between the versions.

use std::fmt;

/// A Kubernetes minor release whose HPA controller this one can behave as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum KubeVersion {
    /// Kubernetes 1.35 (the default where no version is known).
    #[default]
    V1_35,
    /// Kubernetes 1.36.
    V1_36,
    /// Kubernetes 1.37.
    V1_37,
}

/// Why an `--emulated-version` value was refused (component-base's words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// apimachinery's `version.Parse` refused the text.
    #[error("could not parse {0:?} as version")]
    Parse(String),
    /// `kube=1.36.2`: only major.minor.
    #[error("patch version not allowed, got: {component}={version}")]
    Patch {
        /// The component.
        component: String,
        /// The version as given.
        version: String,
    },
    /// `kube=1.36,kube=1.37`.
    #[error("duplicate version flag, {component}={first} and {component}={second}")]
    Duplicate {
        /// The component.
        component: String,
        /// The first version.
        first: String,
        /// The second version.
        second: String,
    },
    /// A component other than `kube`.
    #[error("component not registered: {0}")]
    UnknownComponent(String),
    /// Outside 1.35..1.37.
    #[error("emulation version {version} is not between [{min}, {max}]")]
    OutOfRange {
        /// The version given, `major.minor`.
        version: String,
        /// The oldest supported.
        min: KubeVersion,
        /// The newest supported.
        max: KubeVersion,
    },
}

impl KubeVersion {
    /// Every supported version, oldest first.
    pub const ALL: [KubeVersion; 3] = [KubeVersion::V1_35, KubeVersion::V1_36, KubeVersion::V1_37];
    /// The oldest supported version.
    pub const OLDEST: KubeVersion = KubeVersion::V1_35;
    /// The newest supported version (this binary's own, in component-base's terms).
    pub const NEWEST: KubeVersion = KubeVersion::V1_37;

    /// The minor number (35, 36, 37).
    pub fn minor(self) -> u64 {
        match self {
            KubeVersion::V1_35 => 35,
            KubeVersion::V1_36 => 36,
            KubeVersion::V1_37 => 37,
        }
    }

    fn from_minor(minor: u64) -> Option<KubeVersion> {
        KubeVersion::ALL.into_iter().find(|v| v.minor() == minor)
    }

    /// Whether this version is `other` or newer.
    pub fn at_least(self, other: KubeVersion) -> bool {
        self >= other
    }

    /// The `--emulated-version` values (a pflag string slice: `1.36`, `kube=1.36`), as
    /// component-base's `Set` reads them: `None` when none is given.
    pub fn from_flag(values: &[String]) -> Result<Option<KubeVersion>, VersionError> {
        let mut found: Option<(u64, u64)> = None;
        for item in values {
            let (component, text) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None => ("kube", item.as_str()),
            };
            let (major, minor, patch) = parse_go_version(text)?;
            if patch != 0 {
                return Err(VersionError::Patch {
                    component: component.to_owned(),
                    version: format!("{major}.{minor}.{patch}"),
                });
            }
            if component != "kube" {
                return Err(VersionError::UnknownComponent(component.to_owned()));
            }
            if let Some((m, n)) = found {
                return Err(VersionError::Duplicate {
                    component: component.to_owned(),
                    first: format!("{m}.{n}"),
                    second: format!("{major}.{minor}"),
                });
            }
            found = Some((major, minor));
        }
        let Some((major, minor)) = found else {
            return Ok(None);
        };
        match (major, KubeVersion::from_minor(minor)) {
            (1, Some(v)) => Ok(Some(v)),
            _ => Err(VersionError::OutOfRange {
                version: format!("{major}.{minor}"),
                min: KubeVersion::OLDEST,
                max: KubeVersion::NEWEST,
            }),
        }
    }

    /// The numbers of an API server's `/version` `major` and `minor` (strings, as
    /// `version.Info` has them): the leading digits of each, so a provider's `"37+"` reads as
    /// 37; `None` when either has none.
    pub fn server_major_minor(major: &str, minor: &str) -> Option<(u64, u64)> {
        let digits = |s: &str| -> Option<u64> {
            let d: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
            d.parse().ok()
        };
        Some((digits(major)?, digits(minor)?))
    }

    /// The version to behave as against an API server whose `/version` says `major` and
    /// `minor` (strings, as `version.Info` has them; a provider's `"37+"` counts as 37), with
    /// the warning to log when the server is outside the supported range or unreadable.
    pub fn for_server(
        major: &str,
        minor: &str,
        git_version: &str,
    ) -> (KubeVersion, Option<String>) {
        let Some((maj, min)) = KubeVersion::server_major_minor(major, minor) else {
            return (
                KubeVersion::OLDEST,
                Some(format!(
                    "the API server's version (major {major:?}, minor {minor:?}, gitVersion {git_version:?}) is not a Kubernetes version; behaving as kube-controller-manager {}",
                    KubeVersion::OLDEST
                )),
            );
        };
        if let (1, Some(v)) = (maj, KubeVersion::from_minor(min)) {
            return (v, None);
        }
        let (chosen, side) = if (maj, min) < (1, KubeVersion::OLDEST.minor()) {
            (KubeVersion::OLDEST, "older")
        } else {
            (KubeVersion::NEWEST, "newer")
        };
        (
            chosen,
            Some(format!(
                "the API server is Kubernetes {maj}.{min} ({git_version}), {side} than the versions this controller supports ({}..{}); behaving as kube-controller-manager {chosen}",
                KubeVersion::OLDEST,
                KubeVersion::NEWEST
            )),
        )
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor())
    }
}

/// apimachinery's `version.Parse` (non-strict): optional leading `v`, one to three dotted
/// numbers, any `-pre`/`+build` tail ignored. Returns (major, minor, patch).
fn parse_go_version(text: &str) -> Result<(u64, u64, u64), VersionError> {
    let err = || VersionError::Parse(text.to_owned());
    let trimmed = text.trim();
    let body = trimmed.strip_prefix('v').unwrap_or(trimmed);
    let core = body.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(err());
    }
    let mut nums = [0u64; 3];
    for (i, p) in parts.iter().enumerate() {
        if p.is_empty()
            || !p.chars().all(|c| c.is_ascii_digit())
            || (p.len() > 1 && p.starts_with('0'))
        {
            return Err(err());
        }
        nums[i] = p.parse().map_err(|_| err())?;
    }
    if parts.len() < 2 {
        return Err(err());
    }
    Ok((nums[0], nums[1], nums[2]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag(v: &[&str]) -> Result<Option<KubeVersion>, VersionError> {
        KubeVersion::from_flag(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn flag_forms() {
        assert_eq!(flag(&[]).unwrap(), None);
        assert_eq!(flag(&["1.36"]).unwrap(), Some(KubeVersion::V1_36));
        assert_eq!(flag(&["kube=1.37"]).unwrap(), Some(KubeVersion::V1_37));
        assert_eq!(flag(&["v1.35"]).unwrap(), Some(KubeVersion::V1_35));
        assert_eq!(flag(&["1.35.0"]).unwrap(), Some(KubeVersion::V1_35));
    }

    #[test]
    fn flag_errors_in_component_base_words() {
        assert_eq!(
            flag(&["1.34"]).unwrap_err().to_string(),
            "emulation version 1.34 is not between [1.35, 1.37]"
        );
        assert_eq!(
            flag(&["1.38"]).unwrap_err().to_string(),
            "emulation version 1.38 is not between [1.35, 1.37]"
        );
        assert_eq!(
            flag(&["1.36.2"]).unwrap_err().to_string(),
            "patch version not allowed, got: kube=1.36.2"
        );
        assert_eq!(
            flag(&["wardle=1.2"]).unwrap_err().to_string(),
            "component not registered: wardle"
        );
        assert_eq!(
            flag(&["1.36", "kube=1.37"]).unwrap_err().to_string(),
            "duplicate version flag, kube=1.36 and kube=1.37"
        );
        assert_eq!(
            flag(&["abc"]).unwrap_err().to_string(),
            "could not parse \"abc\" as version"
        );
    }

    #[test]
    fn server_versions() {
        assert_eq!(
            KubeVersion::for_server("1", "36", "v1.36.1"),
            (KubeVersion::V1_36, None)
        );
        assert_eq!(
            KubeVersion::for_server("1", "37+", "v1.37.0-eks"),
            (KubeVersion::V1_37, None)
        );
        let (v, w) = KubeVersion::for_server("1", "33", "v1.33.4");
        assert_eq!(v, KubeVersion::V1_35);
        assert!(w.unwrap().contains("older"));
        let (v, w) = KubeVersion::for_server("1", "40", "v1.40.0");
        assert_eq!(v, KubeVersion::V1_37);
        assert!(w.unwrap().contains("newer"));
        let (v, w) = KubeVersion::for_server("", "", "");
        assert_eq!(v, KubeVersion::V1_35);
        assert!(w.is_some());
    }
}
