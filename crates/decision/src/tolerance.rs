//! Per-HPA tolerances (`tolerancesForHpa`, KEP-4951 `HPAConfigurableTolerance`) and the
//! [`Tolerances`] type the replica calculator applies.
//!
//! Mirrors the `Tolerances` type of `pkg/controller/podautoscaler/replica_calculator.go` and
//! upstream `pkg/controller/podautoscaler/horizontal.go` `tolerancesForHpa` (v1.33+). The
//! latter's text was not in the reference store; the rule below is reconstructed from upstream's
//! calculator callers, the registry strategy and tests, and matches third-party code
//! that reimplements it: start from the `--horizontal-pod-autoscaler-tolerance` flag for
//! both directions; only when the gate is on and `spec.behavior` is set, each direction's
//! `tolerance` quantity (if set) replaces it, read with `AsApproximateFloat64`.

use std::fmt;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;

/// The tolerances applied to a usage ratio: a ratio inside
/// `[1 - scale_down, 1 + scale_up]` (both bounds inclusive) is "close enough" and keeps the
/// current replica count.
///
/// `scale_down` only bounds ratios below 1, `scale_up` only ratios above 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerances {
    /// Tolerance below a ratio of 1.0 (e.g. `0.1` = 10%).
    pub scale_down: f64,
    /// Tolerance above a ratio of 1.0.
    pub scale_up: f64,
}

impl Tolerances {
    /// The upstream default tolerance (`--horizontal-pod-autoscaler-tolerance`), 0.1.
    pub const DEFAULT_TOLERANCE: f64 = 0.1;

    /// Tolerances with distinct scale-down and scale-up values (upstream's positional
    /// `Tolerances{scaleDown, scaleUp}`).
    pub const fn new(scale_down: f64, scale_up: f64) -> Self {
        Self {
            scale_down,
            scale_up,
        }
    }

    /// The same tolerance in both directions (the global flag without per-HPA overrides).
    pub const fn uniform(tolerance: f64) -> Self {
        Self::new(tolerance, tolerance)
    }

    /// Upstream `isWithin`: `(1.0 - scaleDown) <= ratio && ratio <= (1.0 + scaleUp)`, computed in
    /// float64 exactly as written (bounds first, then the comparisons). NaN is never within.
    pub fn is_within(&self, usage_ratio: f64) -> bool {
        (1.0 - self.scale_down) <= usage_ratio && usage_ratio <= (1.0 + self.scale_up)
    }
}

impl Default for Tolerances {
    fn default() -> Self {
        Self::uniform(Self::DEFAULT_TOLERANCE)
    }
}

impl fmt::Display for Tolerances {
    /// Upstream `String()`: `[down:%.1f%%, up:%.1f%%]` of the percentages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[down:{:.1}%, up:{:.1}%]",
            self.scale_down * 100.,
            self.scale_up * 100.
        )
    }
}

/// A `tolerance` quantity in `spec.behavior` that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("invalid {direction} tolerance {value:?}: {source}")]
pub struct ToleranceError {
    /// `scaleUp` or `scaleDown`.
    pub direction: &'static str,
    /// The raw quantity text.
    pub value: String,
    /// The parse error.
    #[source]
    pub source: hpa_quantity::QuantityError,
}

/// Upstream `tolerancesForHpa`: the flag tolerance for both directions, overridden per
/// direction by `spec.behavior.scale{Up,Down}.tolerance` when `configurable_tolerance`
/// (the `HPAConfigurableTolerance` gate, Beta and on by default in 1.35) is enabled.
pub fn tolerances_for_hpa(
    hpa: &HorizontalPodAutoscaler,
    flag_tolerance: f64,
    configurable_tolerance: bool,
) -> Result<Tolerances, ToleranceError> {
    let mut t = Tolerances {
        scale_down: flag_tolerance,
        scale_up: flag_tolerance,
    };
    if !configurable_tolerance {
        return Ok(t);
    }
    let Some(behavior) = hpa.spec.behavior.as_ref() else {
        return Ok(t);
    };
    let read = |q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
                direction: &'static str| {
        hpa_quantity::Quantity::from_k8s(q)
            .map(|q| q.as_approximate_f64())
            .map_err(|source| ToleranceError {
                direction,
                value: q.0.clone(),
                source,
            })
    };
    if let Some(q) = behavior
        .scale_down
        .as_ref()
        .and_then(|r| r.tolerance.as_ref())
    {
        t.scale_down = read(q, "scaleDown")?;
    }
    if let Some(q) = behavior
        .scale_up
        .as_ref()
        .and_then(|r| r.tolerance.as_ref())
    {
        t.scale_up = read(q, "scaleUp")?;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::autoscaling::v2::{
        HPAScalingRules, HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerSpec,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;

    fn hpa(up: Option<&str>, down: Option<&str>, behavior: bool) -> HorizontalPodAutoscaler {
        let rules = |t: Option<&str>| {
            Some(HPAScalingRules {
                tolerance: t.map(|s| Quantity(s.to_owned())),
                ..Default::default()
            })
        };
        HorizontalPodAutoscaler {
            spec: HorizontalPodAutoscalerSpec {
                behavior: behavior.then(|| HorizontalPodAutoscalerBehavior {
                    scale_up: rules(up),
                    scale_down: rules(down),
                }),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn flag_value_without_behavior_or_gate() {
        let want = Tolerances {
            scale_down: 0.1,
            scale_up: 0.1,
        };
        assert_eq!(
            tolerances_for_hpa(&hpa(None, None, false), 0.1, true).unwrap(),
            want
        );
        assert_eq!(
            tolerances_for_hpa(&hpa(Some("0.05"), Some("0.5"), true), 0.1, false).unwrap(),
            want
        );
        assert_eq!(
            tolerances_for_hpa(&hpa(None, None, true), 0.1, true).unwrap(),
            want
        );
    }

    #[test]
    fn per_direction_override() {
        // The 5% / 50% pair of upstream's TestHPAWithTolerance integration test.
        let t = tolerances_for_hpa(&hpa(Some("0.05"), Some("500m"), true), 0.1, true).unwrap();
        assert_eq!(
            t,
            Tolerances {
                scale_down: 0.5,
                scale_up: 0.05
            }
        );
        let t = tolerances_for_hpa(&hpa(None, Some("0"), true), 0.1, true).unwrap();
        assert_eq!(
            t,
            Tolerances {
                scale_down: 0.0,
                scale_up: 0.1
            }
        );
        // Below a milli unit: AsApproximateFloat64 keeps it (MilliValue would round up).
        let t = tolerances_for_hpa(&hpa(Some("100u"), None, true), 0.1, true).unwrap();
        assert!((t.scale_up - 0.0001).abs() < 1e-12);
    }

    #[test]
    fn bad_quantity_is_an_error() {
        let err = tolerances_for_hpa(&hpa(Some("lots"), None, true), 0.1, true).unwrap_err();
        assert_eq!(err.direction, "scaleUp");
    }

    #[test]
    fn display_matches_upstream_format() {
        assert_eq!(
            Tolerances::new(0.1, 0.1).to_string(),
            "[down:10.0%, up:10.0%]"
        );
        assert_eq!(
            Tolerances::new(0.36, 2.0).to_string(),
            "[down:36.0%, up:200.0%]"
        );
    }

    #[test]
    fn bounds_are_inclusive_and_per_direction() {
        let t = Tolerances::new(0.5, 0.25);
        assert!(t.is_within(0.5));
        assert!(t.is_within(1.25));
        assert!(!t.is_within(0.49));
        assert!(!t.is_within(1.26));
        assert!(!t.is_within(f64::NAN));
        assert!(!t.is_within(f64::INFINITY));
        // 1 - 0.1 is 0.9 in float64; 0.9 itself is within.
        assert!(Tolerances::default().is_within(0.9));
        assert!(Tolerances::default().is_within(1.1 - 1e-16));
    }
}
