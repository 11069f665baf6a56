use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior;

use super::*;

fn now() -> Timestamp {
    "2025-06-01T12:00:00Z".parse().unwrap()
}

/// Upstream TestConvertDesiredReplicasWithRules.
#[test]
fn convert_with_rules_table() {
    let cases = [
        (
            5,
            7,
            3,
            8,
            7,
            "DesiredWithinRange",
            "prenormalized desired replicas within range",
        ),
        (
            3,
            1,
            2,
            8,
            2,
            "TooFewReplicas",
            "prenormalized desired replicas < minReplicas",
        ),
        (
            1,
            0,
            0,
            10,
            0,
            "DesiredWithinRange",
            "prenormalized desired zeroed replicas within range",
        ),
        (
            20,
            1000,
            1,
            10,
            10,
            "TooManyReplicas",
            "maxReplicas is the limit because maxReplicas < scaleUpLimit",
        ),
        (
            3,
            1000,
            1,
            2000,
            calculate_scale_up_limit(3),
            "ScaleUpLimit",
            "scaleUpLimit is the limit because scaleUpLimit < maxReplicas",
        ),
    ];
    for (current, desired, min, max, want, reason, name) in cases {
        let (got, got_reason) = convert_desired_replicas_with_rules(current, desired, min, max);
        assert_eq!((got, got_reason.as_str()), (want, reason), "{name}");
    }
}

#[test]
fn scale_up_limit_is_double_or_four() {
    assert_eq!(calculate_scale_up_limit(0), 4);
    assert_eq!(calculate_scale_up_limit(1), 4);
    assert_eq!(calculate_scale_up_limit(3), 6);
    assert_eq!(calculate_scale_up_limit(10), 20);
    // 2 * MaxInt32 overflows int32: Go's amd64 conversion gives MinInt32.
    assert_eq!(calculate_scale_up_limit(i32::MAX), i32::MIN);
}

#[test]
fn legacy_conditions() {
    let mut history = vec![TimestampedRecommendation {
        recommendation: 8,
        timestamp: now() - SignedDuration::from_mins(1),
    }];
    let n = normalize_desired_replicas(
        &mut history,
        8,
        3,
        1,
        10,
        SignedDuration::from_mins(5),
        now(),
    );
    assert_eq!((n.stabilized, n.desired), (8, 8));
    assert_eq!(n.stabilization, StabilizationReason::ScaleDownStabilized);
    assert!(!n.limited());
    assert_eq!(n.scaling_limited_condition().status_str(), "False");
    assert_eq!(n.scaling_limited_condition().reason(), "DesiredWithinRange");
    // Scale-up beyond 2x: limited.
    let mut history = vec![];
    let n = normalize_desired_replicas(
        &mut history,
        3,
        50,
        1,
        100,
        SignedDuration::from_mins(5),
        now(),
    );
    assert_eq!(
        (n.stabilized, n.desired, n.limit),
        (50, 6, LimitReason::ScaleUpLimit)
    );
    assert_eq!(n.able_to_scale_condition().reason(), "ReadyForNewScale");
    assert_eq!(n.scaling_limited_condition().status_str(), "True");
}

#[test]
fn behavior_path_end_to_end() {
    // Default behavior, 5m down window from the flag: a recent higher recommendation
    // holds the scale-down.
    let eff = EffectiveBehavior::new(
        &HorizontalPodAutoscalerBehavior::default(),
        SignedDuration::from_mins(5),
    );
    let mut history = vec![TimestampedRecommendation {
        recommendation: 10,
        timestamp: now() - SignedDuration::from_mins(2),
    }];
    let n = normalize_desired_replicas_with_behaviors(
        &mut history,
        &[],
        &[],
        &eff,
        10,
        4,
        1,
        20,
        now(),
    );
    assert_eq!((n.stabilized, n.desired), (10, 10));
    assert_eq!(n.stabilization, StabilizationReason::ScaleDownStabilized);
    assert_eq!(n.limit, LimitReason::DesiredWithinRange);
    // Scale up from 10 to 50 with defaults: max(10+4, 10*2) = 20.
    let n = normalize_desired_replicas_with_behaviors(
        &mut history,
        &[],
        &[],
        &eff,
        10,
        50,
        1,
        100,
        now(),
    );
    assert_eq!(
        (n.stabilized, n.desired, n.limit, n.rate_limit),
        (50, 20, LimitReason::ScaleUpLimit, Some(20))
    );
    assert_eq!(n.stabilization, StabilizationReason::ReadyForNewScale);
}
