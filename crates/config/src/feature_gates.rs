//! The feature gates that change what the HPA controller does, parsed like component-base's
//! `featuregate.FeatureGate.Set` (`--feature-gates=Key=bool,Key=bool`).
//!
//! Only gates that this controller reads are known; any other name is refused with
//! component-base's words (`unrecognized feature gate: Nope`), so a typo is never silently
//! ignored.

use std::collections::BTreeMap;
use std::fmt;

use crate::strconv::parse_bool;
use crate::version::KubeVersion;

/// A feature gate this controller knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// `HPAConfigurableTolerance`: per-HPA `behavior.scaleUp/scaleDown.tolerance`. Beta (on)
    /// in 1.35 and 1.36, GA and locked on in 1.37 (kubernetes#140107).
    HpaConfigurableTolerance,
    /// `HPAGeneration`: `status.observedGeneration` and each condition's
    /// `observedGeneration`, immediate reconcile of spec changes (kubernetes#138228,
    /// #138653, #138294). Absent before 1.37.
    HpaGeneration,
    /// `HPAScaleToZero`: `minReplicas: 0`, and from 1.36 the `ScaledToZero` condition that
    /// lets the controller scale a target back up from zero (kubernetes#135118). Alpha (off)
    /// in 1.35 and 1.36, beta (on) in 1.37 (kubernetes#139648).
    HpaScaleToZero,
    /// `PodLevelResources` (beta, on): pod-level requests in utilization.
    PodLevelResources,
    /// `StaleControllerConsistencyHPA`: defer a reconcile until the informer has seen this
    /// controller's last status write (kubernetes#139025). Absent before 1.37, beta (on) in
    /// 1.37.
    StaleControllerConsistencyHpa,
}

/// The stage of a gate at a version, as component-base names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Not yet introduced at that version: it cannot be set.
    PreAlpha,
    /// `ALPHA`.
    Alpha,
    /// `BETA`.
    Beta,
    /// General availability (locked to its default where [`FeatureSpec::locked`]).
    Ga,
}

impl Stage {
    /// component-base's `prerelease` value: `ALPHA`, `BETA`, the empty string for GA and
    /// `PRE-ALPHA` (the `stage` label of `kubernetes_feature_enabled`, the word in
    /// `--feature-gates`' help).
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::PreAlpha => "PRE-ALPHA",
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Ga => "",
        }
    }
}

/// A gate's spec at one version (component-base `FeatureSpec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureSpec {
    /// Its default.
    pub default: bool,
    /// Its stage.
    pub stage: Stage,
    /// `LockToDefault`: setting it to the other value is refused.
    pub locked: bool,
}

impl Feature {
    /// Every known gate, in the order `--help` lists them (alphabetical, like component-base).
    pub const ALL: [Feature; 5] = [
        Feature::HpaConfigurableTolerance,
        Feature::HpaGeneration,
        Feature::HpaScaleToZero,
        Feature::PodLevelResources,
        Feature::StaleControllerConsistencyHpa,
    ];

    /// The gate's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Feature::HpaConfigurableTolerance => "HPAConfigurableTolerance",
            Feature::HpaGeneration => "HPAGeneration",
            Feature::HpaScaleToZero => "HPAScaleToZero",
            Feature::PodLevelResources => "PodLevelResources",
            Feature::StaleControllerConsistencyHpa => "StaleControllerConsistencyHPA",
        }
    }

    /// The gate's spec at `version` (upstream `pkg/features/kube_features.go` of that
    /// release; see `docs/versions.md`).
    pub fn spec(self, version: KubeVersion) -> FeatureSpec {
        let (default, stage, locked) = match (self, version) {
            (Feature::HpaConfigurableTolerance, KubeVersion::V1_37) => (true, Stage::Ga, true),
            (Feature::HpaConfigurableTolerance, _) => (true, Stage::Beta, false),
            (Feature::HpaScaleToZero, KubeVersion::V1_37) => (true, Stage::Beta, false),
            (Feature::HpaScaleToZero, _) => (false, Stage::Alpha, false),
            (Feature::PodLevelResources, _) => (true, Stage::Beta, false),
            (
                Feature::HpaGeneration | Feature::StaleControllerConsistencyHpa,
                KubeVersion::V1_37,
            ) => (true, Stage::Beta, false),
            (Feature::HpaGeneration | Feature::StaleControllerConsistencyHpa, _) => {
                (false, Stage::PreAlpha, false)
            }
        };
        FeatureSpec {
            default,
            stage,
            locked,
        }
    }

    /// Upstream's default at `version`.
    pub fn default_at(self, version: KubeVersion) -> bool {
        self.spec(version).default
    }

    fn from_name(name: &str) -> Option<Feature> {
        Feature::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A `--feature-gates` value that component-base would refuse; the message is its own.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// `Name` without `=bool`.
    #[error("missing bool value for {0}")]
    MissingValue(String),
    /// A value that is not a Go bool.
    #[error("invalid value of {key}={value}, err: {source}")]
    InvalidValue {
        /// The gate.
        key: String,
        /// The value given.
        value: String,
        /// Go's ParseBool error.
        source: crate::strconv::StrconvError,
    },
    /// A gate this controller does not know.
    #[error("unrecognized feature gate: {0}")]
    Unrecognized(String),
    /// A GA gate locked to its default, set to the other value.
    #[error("cannot set feature gate {key} to {value}, feature is locked to {default}")]
    Locked {
        /// The gate.
        key: Feature,
        /// The value given.
        value: bool,
        /// The value it is locked to.
        default: bool,
    },
    /// A gate that does not exist yet at the version behaved as.
    #[error(
        "cannot set feature gate {key} to {value}, feature is PreAlpha at emulated version {version}"
    )]
    PreAlpha {
        /// The gate.
        key: Feature,
        /// The value given.
        value: bool,
        /// The version behaved as.
        version: KubeVersion,
    },
}

/// The effective state of every known gate: the defaults of the version behaved as (1.35
/// until [`FeatureGates::at_version`] says otherwise) overridden by the flag.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FeatureGates {
    overrides: BTreeMap<Feature, bool>,
    version: KubeVersion,
}

impl FeatureGates {
    /// Parses one `--feature-gates` value (`A=true,B=false`) and merges it over `self`, as
    /// repeating the flag does in component-base.
    pub fn set(&mut self, value: &str) -> Result<(), FeatureGateError> {
        let mut parsed = BTreeMap::new();
        for item in value.split(',') {
            if item.is_empty() {
                continue;
            }
            let mut kv = item.splitn(2, '=');
            let key = kv.next().unwrap_or_default().trim();
            let Some(raw) = kv.next() else {
                return Err(FeatureGateError::MissingValue(key.to_string()));
            };
            let raw = raw.trim();
            let enabled = parse_bool(raw).map_err(|source| FeatureGateError::InvalidValue {
                key: key.to_string(),
                value: raw.to_string(),
                source,
            })?;
            let feature = Feature::from_name(key)
                .ok_or_else(|| FeatureGateError::Unrecognized(key.to_string()))?;
            parsed.insert(feature, enabled);
        }
        self.overrides.extend(parsed);
        Ok(())
    }

    /// Parses a whole flag value into gates over the defaults.
    pub fn parse(value: &str) -> Result<FeatureGates, FeatureGateError> {
        let mut gates = FeatureGates::default();
        gates.set(value)?;
        Ok(gates)
    }

    /// Applies `other`'s explicit settings over `self`'s.
    pub fn merge(&mut self, other: &FeatureGates) {
        self.overrides
            .extend(other.overrides.iter().map(|(k, v)| (*k, *v)));
    }

    /// Whether `feature` is on.
    pub fn enabled(&self, feature: Feature) -> bool {
        self.overrides
            .get(&feature)
            .copied()
            .unwrap_or_else(|| feature.default_at(self.version))
    }

    /// The version whose defaults and lock-ins apply.
    pub fn version(&self) -> KubeVersion {
        self.version
    }

    /// Every known gate that exists at [`FeatureGates::version`] with its stage there and
    /// whether it is on, in [`Feature::ALL`]'s order: what component-base's `AddMetrics`
    /// records (`GetAll` leaves out the gates that are pre-alpha at the emulated version).
    pub fn states(&self) -> Vec<(Feature, Stage, bool)> {
        Feature::ALL
            .into_iter()
            .filter_map(|f| {
                let stage = f.spec(self.version).stage;
                (stage != Stage::PreAlpha).then(|| (f, stage, self.enabled(f)))
            })
            .collect()
    }

    /// These settings at `version`, checked as component-base's `SetEmulationVersion` and
    /// `Set` check them: a locked gate set to the other value and a gate that does not exist
    /// yet are refused (the first such, in gate order); setting a GA gate is allowed with
    /// component-base's warning, returned for the caller to log.
    pub fn at_version(
        &self,
        version: KubeVersion,
    ) -> Result<(FeatureGates, Vec<String>), FeatureGateError> {
        let mut warnings = Vec::new();
        for (&key, &value) in &self.overrides {
            let spec = key.spec(version);
            if spec.locked && spec.default != value {
                return Err(FeatureGateError::Locked {
                    key,
                    value,
                    default: spec.default,
                });
            }
            match spec.stage {
                Stage::PreAlpha => {
                    return Err(FeatureGateError::PreAlpha {
                        key,
                        value,
                        version,
                    });
                }
                Stage::Ga => warnings.push(format!(
                    "Setting GA feature gate {key}={value}. It will be removed in a future release."
                )),
                Stage::Alpha | Stage::Beta => {}
            }
        }
        Ok((
            FeatureGates {
                overrides: self.overrides.clone(),
                version,
            },
            warnings,
        ))
    }

    /// The `--feature-gates` help text: component-base's sentence and one line per gate
    /// that is alpha or beta in this binary's newest version (component-base's
    /// `KnownFeatures` leaves GA gates out), with that version's default.
    pub fn help() -> String {
        let mut out = String::from(
            "A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:",
        );
        for f in Feature::ALL {
            let spec = f.spec(KubeVersion::NEWEST);
            let stage = match spec.stage {
                Stage::Alpha | Stage::Beta => spec.stage.as_str(),
                Stage::Ga | Stage::PreAlpha => continue,
            };
            out.push_str(&format!(
                "\n{}=true|false ({} - default={})",
                f.name(),
                stage,
                spec.default
            ));
        }
        out.push_str(&format!(
            "\n(The defaults shown are {}'s; behaving as an older version, chosen by --emulated-version or the API server's version, applies that version's defaults and lock-ins.)",
            KubeVersion::NEWEST
        ));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstream_1_35() {
        let g = FeatureGates::default();
        assert!(g.enabled(Feature::HpaConfigurableTolerance));
        assert!(!g.enabled(Feature::HpaScaleToZero));
        assert!(g.enabled(Feature::PodLevelResources));
        assert!(!g.enabled(Feature::HpaGeneration));
        assert!(!g.enabled(Feature::StaleControllerConsistencyHpa));
    }

    #[test]
    fn defaults_follow_the_version() {
        let (g, w) = FeatureGates::default()
            .at_version(KubeVersion::V1_36)
            .unwrap();
        assert!(w.is_empty());
        assert!(!g.enabled(Feature::HpaScaleToZero));
        assert!(!g.enabled(Feature::HpaGeneration));
        let (g, _) = FeatureGates::default()
            .at_version(KubeVersion::V1_37)
            .unwrap();
        assert!(g.enabled(Feature::HpaScaleToZero));
        assert!(g.enabled(Feature::HpaConfigurableTolerance));
        assert!(g.enabled(Feature::HpaGeneration));
        assert!(g.enabled(Feature::StaleControllerConsistencyHpa));
        let (g, _) = FeatureGates::parse("HPAScaleToZero=false")
            .unwrap()
            .at_version(KubeVersion::V1_37)
            .unwrap();
        assert!(!g.enabled(Feature::HpaScaleToZero));
    }

    #[test]
    fn lock_ins_and_unborn_gates_are_refused() {
        let g = FeatureGates::parse("HPAConfigurableTolerance=false").unwrap();
        assert!(g.at_version(KubeVersion::V1_36).is_ok());
        assert_eq!(
            g.at_version(KubeVersion::V1_37).unwrap_err().to_string(),
            "cannot set feature gate HPAConfigurableTolerance to false, feature is locked to true"
        );
        let (_, w) = FeatureGates::parse("HPAConfigurableTolerance=true")
            .unwrap()
            .at_version(KubeVersion::V1_37)
            .unwrap();
        assert_eq!(
            w,
            vec![
                "Setting GA feature gate HPAConfigurableTolerance=true. It will be removed in a future release."
            ]
        );
        assert_eq!(
            FeatureGates::parse("HPAGeneration=true")
                .unwrap()
                .at_version(KubeVersion::V1_35)
                .unwrap_err()
                .to_string(),
            "cannot set feature gate HPAGeneration to true, feature is PreAlpha at emulated version 1.35"
        );
    }

    #[test]
    fn states_leave_out_gates_not_born_yet() {
        let names = |g: &FeatureGates| {
            g.states()
                .into_iter()
                .map(|(f, stage, on)| format!("{f} {:?} {on}", stage.as_str()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&FeatureGates::default()),
            [
                r#"HPAConfigurableTolerance "BETA" true"#,
                r#"HPAScaleToZero "ALPHA" false"#,
                r#"PodLevelResources "BETA" true"#,
            ]
        );
        let (g, _) = FeatureGates::parse("HPAScaleToZero=false")
            .unwrap()
            .at_version(KubeVersion::V1_37)
            .unwrap();
        assert_eq!(
            names(&g),
            [
                r#"HPAConfigurableTolerance "" true"#,
                r#"HPAGeneration "BETA" true"#,
                r#"HPAScaleToZero "BETA" false"#,
                r#"PodLevelResources "BETA" true"#,
                r#"StaleControllerConsistencyHPA "BETA" true"#,
            ]
        );
    }

    #[test]
    fn parses_and_merges() {
        let mut g =
            FeatureGates::parse("HPAScaleToZero=true, HPAConfigurableTolerance=false").unwrap();
        assert!(g.enabled(Feature::HpaScaleToZero));
        assert!(!g.enabled(Feature::HpaConfigurableTolerance));
        g.set("HPAScaleToZero=0,").unwrap();
        assert!(!g.enabled(Feature::HpaScaleToZero));
        assert!(!g.enabled(Feature::HpaConfigurableTolerance));
    }

    #[test]
    fn errors_in_component_base_words() {
        assert_eq!(
            FeatureGates::parse("Nope=true").unwrap_err().to_string(),
            "unrecognized feature gate: Nope"
        );
        assert_eq!(
            FeatureGates::parse("HPAScaleToZero")
                .unwrap_err()
                .to_string(),
            "missing bool value for HPAScaleToZero"
        );
        assert_eq!(
            FeatureGates::parse("HPAScaleToZero=yes")
                .unwrap_err()
                .to_string(),
            r#"invalid value of HPAScaleToZero=yes, err: strconv.ParseBool: parsing "yes": invalid syntax"#
        );
    }
}
