//! Normalization of the metrics' desired replica count: stabilization, rate limits and
//! min/max clamps (`normalizeDesiredReplicas` without `spec.behavior`, `normalizeDesiredReplicasWithBehaviors` with it).
//!
//! Mirrors upstream `pkg/controller/podautoscaler/horizontal.go`: `normalizeDesiredReplicas`,
//! `convertDesiredReplicasWithRules`, `calculateScaleUpLimit` (constants
//! `scaleUpLimitFactor = 2.0`, `scaleUpLimitMinimum = 4.0`) and
//! `normalizeDesiredReplicasWithBehaviors`. The functions here take one HPA's history
//! explicitly; [`crate::state::HpaState`] wraps them with the per-HPA locking.

use jiff::{SignedDuration, Timestamp};

use crate::behavior::{
    EffectiveBehavior, PolicyLimit, convert_desired_replicas_with_behavior_rate,
};
use crate::conditions::{HpaCondition, LimitReason, StabilizationReason};
use crate::recommendations::{
    TimestampedRecommendation, stabilize_recommendation, stabilize_recommendation_with_behaviors,
};
use crate::scale_events::TimestampedScaleEvent;

/// Upstream `scaleUpLimitFactor`.
pub const SCALE_UP_LIMIT_FACTOR: f64 = 2.0;
/// Upstream `scaleUpLimitMinimum`.
pub const SCALE_UP_LIMIT_MINIMUM: f64 = 4.0;

/// Every step of one normalization, for the [`crate::decision::Decision`] record and the
/// `AbleToScale` / `ScalingLimited` conditions it sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalization {
    /// Whether the behavior path (`normalizeDesiredReplicasWithBehaviors`) ran; otherwise the legacy path (`normalizeDesiredReplicas`).
    pub with_behavior: bool,
    /// The metrics' desired count before normalization.
    pub prenormalized: i32,
    /// After the stabilization window(s).
    pub stabilized: i32,
    /// The `AbleToScale=True` reason: `ReadyForNewScale` when stabilization changed nothing.
    pub stabilization: StabilizationReason,
    /// The rate bound computed for the direction: `max(2*current, 4)` on the legacy path
    /// (always computed), the clamped policy limit on the behavior path (`None` when the
    /// stabilized count equals the current one).
    pub rate_limit: Option<i32>,
    /// The final count.
    pub desired: i32,
    /// Which bound produced `desired`.
    pub limit: LimitReason,
    /// The recommendation history the stabilization read (before this decision's own
    /// recommendation was recorded), for traces.
    pub recommendations: Vec<TimestampedRecommendation>,
    /// The stabilization windows applied, in seconds: `(up, down)`; the legacy path has no
    /// scale-up window (`0`) and the flag's downscale window.
    pub windows_seconds: (i64, i64),
    /// The behavior policies of the direction with their own limits (behavior path only).
    pub policies: Vec<PolicyLimit>,
}

impl Normalization {
    /// Whether a limit changed the stabilized count (`ScalingLimited=True`).
    pub fn limited(&self) -> bool {
        self.desired != self.stabilized
    }

    /// The `AbleToScale` condition normalization sets.
    pub fn able_to_scale_condition(&self) -> HpaCondition {
        HpaCondition::Stabilization(self.stabilization)
    }

    /// The `ScalingLimited` condition normalization sets.
    pub fn scaling_limited_condition(&self) -> HpaCondition {
        HpaCondition::ScalingLimited {
            limited: self.limited(),
            reason: self.limit,
        }
    }
}

/// Upstream `calculateScaleUpLimit`: `int32(max(2 * current, 4))`.
pub fn calculate_scale_up_limit(current: i32) -> i32 {
    crate::goconv::f64_to_i32(
        (SCALE_UP_LIMIT_FACTOR * f64::from(current)).max(SCALE_UP_LIMIT_MINIMUM),
    )
}

/// Upstream `convertDesiredReplicasWithRules`: clamp to `[min, min(max, scaleUpLimit)]`,
/// reporting which bound applied (`TooFewReplicas` is checked first).
pub fn convert_desired_replicas_with_rules(
    current: i32,
    desired: i32,
    min_replicas: i32,
    max_replicas: i32,
) -> (i32, LimitReason) {
    let scale_up_limit = calculate_scale_up_limit(current);
    let (maximum, reason) = if max_replicas > scale_up_limit {
        (scale_up_limit, LimitReason::ScaleUpLimit)
    } else {
        (max_replicas, LimitReason::TooManyReplicas)
    };
    if desired < min_replicas {
        (min_replicas, LimitReason::TooFewReplicas)
    } else if desired > maximum {
        (maximum, reason)
    } else {
        (desired, LimitReason::DesiredWithinRange)
    }
}

/// Upstream `normalizeDesiredReplicas` (no behavior): downscale stabilization over
/// `window` (the `--horizontal-pod-autoscaler-downscale-stabilization` flag), then
/// [`convert_desired_replicas_with_rules`].
pub fn normalize_desired_replicas(
    history: &mut Vec<TimestampedRecommendation>,
    current: i32,
    prenormalized: i32,
    min_replicas: i32,
    max_replicas: i32,
    window: SignedDuration,
    now: Timestamp,
) -> Normalization {
    let recommendations = history.clone();
    let stabilized = stabilize_recommendation(history, prenormalized, window, now);
    let stabilization = if stabilized != prenormalized {
        StabilizationReason::ScaleDownStabilized
    } else {
        StabilizationReason::ReadyForNewScale
    };
    let (desired, limit) =
        convert_desired_replicas_with_rules(current, stabilized, min_replicas, max_replicas);
    Normalization {
        with_behavior: false,
        prenormalized,
        stabilized,
        stabilization,
        rate_limit: Some(calculate_scale_up_limit(current)),
        desired,
        limit,
        recommendations,
        windows_seconds: (0, window.as_secs()),
        policies: Vec::new(),
    }
}

/// Upstream `normalizeDesiredReplicasWithBehaviors`: both stabilization windows, then the
/// policy rate limits and min/max.
#[allow(clippy::too_many_arguments)]
pub fn normalize_desired_replicas_with_behaviors(
    history: &mut Vec<TimestampedRecommendation>,
    up_events: &[TimestampedScaleEvent],
    down_events: &[TimestampedScaleEvent],
    behavior: &EffectiveBehavior,
    current: i32,
    prenormalized: i32,
    min_replicas: i32,
    max_replicas: i32,
    now: Timestamp,
) -> Normalization {
    let recommendations = history.clone();
    let (stabilized, reason) = stabilize_recommendation_with_behaviors(
        history,
        current,
        prenormalized,
        behavior.scale_up_window_seconds,
        behavior.scale_down_window_seconds,
        now,
    );
    let stabilization = if stabilized != prenormalized {
        reason
    } else {
        StabilizationReason::ReadyForNewScale
    };
    let limited = convert_desired_replicas_with_behavior_rate(
        current,
        stabilized,
        min_replicas,
        max_replicas,
        behavior,
        up_events,
        down_events,
        now,
    );
    Normalization {
        with_behavior: true,
        prenormalized,
        stabilized,
        stabilization,
        rate_limit: limited.rate_limit,
        desired: limited.replicas,
        limit: limited.reason,
        recommendations,
        windows_seconds: (
            i64::from(behavior.scale_up_window_seconds),
            i64::from(behavior.scale_down_window_seconds),
        ),
        policies: limited.policies,
    }
}

#[cfg(test)]
mod tests;
