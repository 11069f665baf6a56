//! The feature gates that change what the HPA controller does, parsed like component-base's
//! `featuregate.FeatureGate.Set` (`--feature-gates=Key=bool,Key=bool`).
//!
//! Only gates that this controller reads are known; any other name is refused with
//! component-base's words (`unrecognized feature gate: Nope`), so a typo is never silently
//! ignored.

use std::collections::BTreeMap;
use std::fmt;

use crate::strconv::parse_bool;

/// A feature gate this controller knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// `HPAConfigurableTolerance` (beta in 1.35, default on): per-HPA
    /// `behavior.scaleUp/scaleDown.tolerance`.
    HpaConfigurableTolerance,
    /// `HPAScaleToZero` (alpha, default off): `minReplicas: 0`. Enforced by API validation; the
    /// controller handles zero either way.
    HpaScaleToZero,
    /// `PodLevelResources` (beta in 1.34, default on): pod-level requests in utilization.
    PodLevelResources,
}

/// The stage of a gate, as `--help` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Alpha,
    Beta,
}

impl Feature {
    /// Every known gate, in the order `--help` lists them (alphabetical, like component-base).
    pub const ALL: [Feature; 3] = [
        Feature::HpaConfigurableTolerance,
        Feature::HpaScaleToZero,
        Feature::PodLevelResources,
    ];

    /// The gate's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Feature::HpaConfigurableTolerance => "HPAConfigurableTolerance",
            Feature::HpaScaleToZero => "HPAScaleToZero",
            Feature::PodLevelResources => "PodLevelResources",
        }
    }

    /// Upstream's default in Kubernetes 1.35.
    pub fn default_enabled(self) -> bool {
        match self {
            Feature::HpaConfigurableTolerance | Feature::PodLevelResources => true,
            Feature::HpaScaleToZero => false,
        }
    }

    fn stage(self) -> Stage {
        match self {
            Feature::HpaScaleToZero => Stage::Alpha,
            Feature::HpaConfigurableTolerance | Feature::PodLevelResources => Stage::Beta,
        }
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
}

/// The effective state of every known gate: upstream defaults overridden by the flag.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FeatureGates {
    overrides: BTreeMap<Feature, bool>,
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
            .unwrap_or_else(|| feature.default_enabled())
    }

    /// The `--feature-gates` help text: component-base's sentence and one line per gate.
    pub fn help() -> String {
        let mut out = String::from(
            "A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:",
        );
        for f in Feature::ALL {
            let stage = match f.stage() {
                Stage::Alpha => "ALPHA",
                Stage::Beta => "BETA",
            };
            out.push_str(&format!(
                "\n{}=true|false ({} - default={})",
                f.name(),
                stage,
                f.default_enabled()
            ));
        }
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
