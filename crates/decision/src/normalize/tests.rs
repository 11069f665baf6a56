use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior;

use super::*;

fn now() -> Timestamp {
    "2025-06-01T12:00:00Z".parse().unwrap()
}

/// Upstream TestConvertDesiredReplicasWithRules.
#[test]
fn convert_with_rules_table() {
    struct Case {
        name: &'static str,
        current: i32,
        desired: i32,
        min: i32,
        max: i32,
        want: i32,
        reason: &'static str,
    }
    let cases = [
        Case {
            name: "prenormalized desired replicas within range",
            current: 5,
            desired: 7,
            min: 3,
            max: 8,
            want: 7,
            reason: "DesiredWithinRange",
        },
        Case {
            name: "prenormalized desired replicas < minReplicas",
            current: 3,
            desired: 1,
            min: 2,
            max: 8,
            want: 2,
            reason: "TooFewReplicas",
        },
        Case {
            name: "prenormalized desired zeroed replicas within range",
            current: 1,
            desired: 0,
            min: 0,
            max: 10,
            want: 0,
            reason: "DesiredWithinRange",
        },
        Case {
            name: "maxReplicas is the limit because maxReplicas < scaleUpLimit",
            current: 20,
            desired: 1000,
            min: 1,
            max: 10,
            want: 10,
            reason: "TooManyReplicas",
        },
        Case {
            name: "scaleUpLimit is the limit because scaleUpLimit < maxReplicas",
            current: 3,
            desired: 1000,
            min: 1,
            max: 2000,
            want: calculate_scale_up_limit(3),
            reason: "ScaleUpLimit",
        },
    ];
    for c in cases {
        let (got, got_reason) =
            convert_desired_replicas_with_rules(c.current, c.desired, c.min, c.max);
        assert_eq!((got, got_reason.as_str()), (c.want, c.reason), "{}", c.name);
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
