//! Per-HPA tolerances (`tolerancesForHpa`, KEP-4951 `HPAConfigurableTolerance`).
//!
//! Mirrors upstream `pkg/controller/podautoscaler/horizontal.go` `tolerancesForHpa` (v1.33+).
//! That text was not in the reference store; the rule below is reconstructed from upstream's
//! calculator callers, the registry strategy and tests, and matches third-party code
//! that reimplements it: start from the `--horizontal-pod-autoscaler-tolerance` flag for
//! both directions; only when the gate is on and `spec.behavior` is set, each direction's
//! `tolerance` quantity (if set) replaces it, read with `AsApproximateFloat64`.

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;

/// The tolerances for one HPA. Same fields as `hpa_replica_calculator::Tolerances`, which
/// the calculator uses; kept separate so this crate does not depend on the calculator yet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HpaTolerances {
    /// Tolerance below a usage ratio of 1.0.
    pub scale_down: f64,
    /// Tolerance above a usage ratio of 1.0.
    pub scale_up: f64,
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
) -> Result<HpaTolerances, ToleranceError> {
    let mut t = HpaTolerances {
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
        let want = HpaTolerances {
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
            HpaTolerances {
                scale_down: 0.5,
                scale_up: 0.05
            }
        );
        let t = tolerances_for_hpa(&hpa(None, Some("0"), true), 0.1, true).unwrap();
        assert_eq!(
            t,
            HpaTolerances {
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
}
