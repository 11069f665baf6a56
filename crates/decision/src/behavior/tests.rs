use k8s_openapi::api::autoscaling::v2::HPAScalingPolicy;

use super::*;

/// Upstream test helper `generateScalingRules` (Max policy; a zero `pods` / `percent`
/// omits that policy).
pub(crate) fn generate_scaling_rules(
    pods_value: i32,
    pods_period: i32,
    percent_value: i32,
    percent_period: i32,
    window: i32,
) -> ScalingRules {
    let mut policies = vec![];
    if pods_value != 0 {
        policies.push(pods(pods_value, pods_period));
    }
    if percent_value != 0 {
        policies.push(percent(percent_value, percent_period));
    }
    ScalingRules {
        stabilization_window_seconds: Some(window),
        select_policy: SelectPolicy::Max,
        policies,
        tolerance: None,
    }
}

fn to_api(r: &ScalingRules) -> HPAScalingRules {
    HPAScalingRules {
        stabilization_window_seconds: r.stabilization_window_seconds,
        select_policy: Some(r.select_policy.as_str().to_owned()),
        policies: Some(
            r.policies
                .iter()
                .map(|p| HPAScalingPolicy {
                    type_: match &p.type_ {
                        PolicyType::Pods => "Pods".into(),
                        PolicyType::Percent => "Percent".into(),
                        PolicyType::Other(s) => s.clone(),
                    },
                    value: p.value,
                    period_seconds: p.period_seconds,
                })
                .collect(),
        ),
        tolerance: r.tolerance.clone(),
    }
}

fn now() -> Timestamp {
    "2025-06-01T12:00:00Z".parse().unwrap()
}

/// Upstream test helper `generateEventsUniformDistribution`: events spread over the
/// last `period` seconds, each in the middle of its segment; the offset is truncated to
/// whole seconds as upstream's `time.Duration(float)` conversion does.
pub(crate) fn events_uniform(
    raw: &[i32],
    period: i32,
    now: Timestamp,
) -> Vec<TimestampedScaleEvent> {
    let seg = f64::from(period) / raw.len() as f64;
    raw.iter()
        .enumerate()
        .map(|(i, &change)| {
            let boundary = (f64::from(period) - seg * (i as f64 + 1.0) + seg / 2.0) as i64;
            TimestampedScaleEvent {
                replica_change: change,
                timestamp: now - SignedDuration::from_secs(boundary),
                outdated: false,
            }
        })
        .collect()
}

#[test]
fn defaults_match_api_defaulting() {
    let up = generate_scale_up_rules(None);
    assert_eq!(up.stabilization_window_seconds, Some(0));
    assert_eq!(up.select_policy, SelectPolicy::Max);
    assert_eq!(up.policies, vec![pods(4, 15), percent(100, 15)]);
    let down = generate_scale_down_rules(None);
    assert_eq!(down.stabilization_window_seconds, None);
    assert_eq!(down.policies, vec![percent(100, 15)]);
    // Field-by-field overlay.
    let user = HPAScalingRules {
        select_policy: Some("Min".into()),
        ..Default::default()
    };
    let down = generate_scale_down_rules(Some(&user));
    assert_eq!(down.select_policy, SelectPolicy::Min);
    assert_eq!(down.policies, vec![percent(100, 15)]);
    // An explicit empty list replaces the defaults.
    let user = HPAScalingRules {
        policies: Some(vec![]),
        ..Default::default()
    };
    assert!(generate_scale_up_rules(Some(&user)).policies.is_empty());
    // The flag fills the scale-down window; the user's value wins.
    let b = HorizontalPodAutoscalerBehavior::default();
    let eff = EffectiveBehavior::new(&b, SignedDuration::from_mins(5));
    assert_eq!(
        (eff.scale_up_window_seconds, eff.scale_down_window_seconds),
        (0, 300)
    );
    let b = HorizontalPodAutoscalerBehavior {
        scale_down: Some(HPAScalingRules {
            stabilization_window_seconds: Some(60),
            ..Default::default()
        }),
        ..Default::default()
    };
    assert_eq!(
        EffectiveBehavior::new(&b, SignedDuration::from_mins(5)).scale_down_window_seconds,
        60
    );
    assert_eq!(
        EffectiveBehavior::new(
            &HorizontalPodAutoscalerBehavior::default(),
            SignedDuration::from_millis(1500)
        )
        .scale_down_window_seconds,
        1
    );
}

/// Upstream TestCalculateScaleUpLimitWithScalingRules.
#[test]
fn scale_up_limit_min_policy() {
    let rules = ScalingRules {
        stabilization_window_seconds: Some(300),
        select_policy: SelectPolicy::Min,
        policies: vec![pods(2, 60), percent(50, 60)],
        tolerance: None,
    };
    assert_eq!(
        calculate_scale_up_limit_with_scaling_rules(1, &[], &[], &rules, now()),
        2
    );
}

/// Upstream TestCalculateScaleDownLimitWithBehaviors.
#[test]
fn scale_down_limit_min_policy() {
    let rules = ScalingRules {
        stabilization_window_seconds: Some(300),
        select_policy: SelectPolicy::Min,
        policies: vec![pods(2, 60), percent(50, 60)],
        tolerance: None,
    };
    assert_eq!(
        calculate_scale_down_limit_with_behaviors(5, &[], &[], &rules, now()),
        3
    );
}

#[test]
fn disabled_and_unknown_policy_types() {
    let mut rules = generate_scaling_rules(4, 15, 100, 15, 0);
    rules.select_policy = SelectPolicy::Disabled;
    assert_eq!(
        calculate_scale_up_limit_with_scaling_rules(10, &[], &[], &rules, now()),
        10
    );
    assert_eq!(
        calculate_scale_down_limit_with_behaviors(10, &[], &[], &rules, now()),
        10
    );
    // An unknown type re-uses the previous proposal (0 at first).
    let rules = ScalingRules {
        stabilization_window_seconds: Some(0),
        select_policy: SelectPolicy::Max,
        policies: vec![ScalingPolicy {
            type_: PolicyType::Other("Bogus".into()),
            value: 9,
            period_seconds: 15,
        }],
        tolerance: None,
    };
    assert_eq!(
        calculate_scale_up_limit_with_scaling_rules(10, &[], &[], &rules, now()),
        0
    );
    assert_eq!(SelectPolicy::from_api("whatever"), SelectPolicy::Max);
}

/// Upstream TestScalingWithRules (expected replicas and conditions from upstream's table).
#[test]
fn scaling_with_rules_table() {
    #[derive(Default)]
    struct Case {
        name: &'static str,
        up_events: Vec<TimestampedScaleEvent>,
        down_events: Vec<TimestampedScaleEvent>,
        min: i32,
        max: i32,
        up: Option<ScalingRules>,
        down: Option<ScalingRules>,
        current: i32,
        desired: i32,
        want: i32,
        want_reason: &'static str,
    }
    let n = now();
    let g = generate_scaling_rules;
    let e = |raw: &[i32]| events_uniform(raw, 120, n);
    let cases = vec![
        Case {
            name: "prenormalized desired replicas within range",
            min: 3,
            max: 8,
            current: 5,
            desired: 7,
            want: 7,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        Case {
            name: "prenormalized desired replicas < minReplicas",
            min: 2,
            max: 8,
            current: 3,
            desired: 1,
            want: 2,
            want_reason: "TooFewReplicas",
            ..Case::default()
        },
        Case {
            name: "prenormalized desired replicas within range when minReplicas is 0",
            min: 0,
            max: 10,
            current: 1,
            desired: 0,
            want: 0,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        Case {
            name: "maxReplicas is the limit because maxReplicas < scaleUpLimit",
            min: 1,
            max: 10,
            current: 20,
            desired: 1000,
            want: 10,
            want_reason: "TooManyReplicas",
            ..Case::default()
        },
        Case {
            name: "desired replica count is more than the maximum replica count",
            min: 100,
            max: 150,
            current: 100,
            desired: 1000,
            want: 150,
            want_reason: "TooManyReplicas",
            ..Case::default()
        },
        Case {
            name: "scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies",
            min: 1,
            max: 2000,
            up: Some(g(0, 0, 1, 60, 0)),
            current: 3,
            desired: 1000,
            want: 4,
            want_reason: "ScaleUpLimit",
            ..Case::default()
        },
        Case {
            name: "scaleDownLimit is the limit because scaleDownLimit > minReplicas with user defined policies",
            min: 3,
            max: 2000,
            down: Some(g(20, 60, 0, 0, 0)),
            current: 1000,
            desired: 3,
            want: 980,
            want_reason: "ScaleDownLimit",
            ..Case::default()
        },
        Case {
            name: "scaleUp with default behavior",
            min: 1,
            max: 1000,
            current: 10,
            desired: 50,
            want: 20,
            want_reason: "ScaleUpLimit",
            ..Case::default()
        },
        Case {
            name: "scaleUp with pods policy larger than percent policy",
            min: 1,
            max: 1000,
            up: Some(g(100, 60, 100, 60, 0)),
            current: 10,
            desired: 500,
            want: 110,
            want_reason: "ScaleUpLimit",
            ..Case::default()
        },
        Case {
            name: "scaleUp with percent policy larger than pods policy",
            min: 1,
            max: 1000,
            up: Some(g(2, 60, 100, 60, 0)),
            current: 10,
            desired: 500,
            want: 20,
            want_reason: "ScaleUpLimit",
            ..Case::default()
        },
        Case {
            name: "scaleUp with spec MaxReplicas limitation with large pod policy",
            min: 1,
            max: 1000,
            up: Some(g(100, 60, 0, 0, 0)),
            current: 10,
            desired: 50,
            want: 50,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        Case {
            name: "scaleUp with spec MaxReplicas limitation with large percent policy",
            min: 1,
            max: 1000,
            up: Some(g(10000, 60, 0, 0, 0)),
            current: 10,
            desired: 50,
            want: 50,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        Case {
            name: "scaleUp with pod policy limitation",
            min: 1,
            max: 1000,
            up: Some(g(30, 60, 0, 0, 0)),
            current: 10,
            desired: 50,
            want: 40,
            want_reason: "ScaleUpLimit",
            ..Case::default()
        },
        Case {
            name: "scaleUp with percent policy limitation",
            min: 1,
            max: 1000,
            up: Some(g(0, 0, 200, 60, 0)),
            current: 10,
            desired: 50,
            want: 30,
            want_reason: "ScaleUpLimit",
            ..Case::default()
        },
        Case {
            name: "scaleDown with percent policy larger than pod policy",
            min: 1,
            max: 1000,
            down: Some(g(20, 60, 1, 60, 300)),
            current: 100,
            desired: 2,
            want: 80,
            want_reason: "ScaleDownLimit",
            ..Case::default()
        },
        Case {
            name: "scaleDown with pod policy larger than percent policy",
            min: 1,
            max: 1000,
            down: Some(g(2, 60, 1, 60, 300)),
            current: 100,
            desired: 2,
            want: 98,
            want_reason: "ScaleDownLimit",
            ..Case::default()
        },
        Case {
            name: "scaleDown with spec MinReplicas=nil limitation with large pod policy",
            min: 1,
            max: 1000,
            down: Some(g(100, 60, 0, 0, 300)),
            current: 10,
            desired: 0,
            want: 1,
            want_reason: "TooFewReplicas",
            ..Case::default()
        },
        Case {
            name: "scaleDown with spec MinReplicas limitation with large pod policy",
            min: 1,
            max: 1000,
            down: Some(g(100, 60, 0, 0, 300)),
            current: 10,
            desired: 0,
            want: 1,
            want_reason: "TooFewReplicas",
            ..Case::default()
        },
        Case {
            name: "scaleDown with spec MinReplicas limitation with large percent policy",
            min: 5,
            max: 1000,
            down: Some(g(0, 0, 100, 60, 300)),
            current: 10,
            desired: 2,
            want: 5,
            want_reason: "TooFewReplicas",
            ..Case::default()
        },
        Case {
            name: "scaleDown with pod policy limitation",
            min: 1,
            max: 1000,
            down: Some(g(5, 60, 0, 0, 300)),
            current: 10,
            desired: 2,
            want: 5,
            want_reason: "ScaleDownLimit",
            ..Case::default()
        },
        Case {
            name: "scaleDown with percent policy limitation",
            min: 1,
            max: 1000,
            down: Some(g(0, 0, 50, 60, 300)),
            current: 10,
            desired: 5,
            want: 5,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        Case {
            name: "scaleUp with spec MaxReplicas limitation with large pod policy and events",
            min: 1,
            max: 200,
            up: Some(g(300, 60, 0, 0, 0)),
            up_events: e(&[1, 5, 9]),
            current: 100,
            desired: 500,
            want: 200,
            want_reason: "TooManyReplicas",
            ..Case::default()
        },
        Case {
            name: "scaleUp with spec MaxReplicas limitation with large percent policy and events",
            min: 1,
            max: 200,
            up: Some(g(0, 0, 10000, 60, 0)),
            up_events: e(&[1, 5, 9]),
            current: 100,
            desired: 500,
            want: 200,
            want_reason: "TooManyReplicas",
            ..Case::default()
        },
        Case {
            name: "scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of recent scale up events",
            min: 1,
            max: 1000,
            up: Some(g(5, 120, 0, 0, 0)),
            up_events: e(&[1, 5, 9]),
            current: 100,
            desired: 500,
            want: 100,
            want_reason: "ScaleUpLimit",
            ..Case::default()
        },
        Case {
            name: "scaleUp with pod policy and previous scale up events",
            min: 1,
            max: 1000,
            up: Some(g(150, 120, 0, 0, 0)),
            up_events: e(&[1, 5, 9]),
            current: 100,
            desired: 500,
            want: 235,
            want_reason: "ScaleUpLimit",
            ..Case::default()
        },
        Case {
            name: "scaleUp with percent policy and previous scale up events",
            min: 1,
            max: 1000,
            up: Some(g(0, 0, 200, 120, 0)),
            up_events: e(&[1, 5, 9]),
            current: 100,
            desired: 500,
            want: 255,
            want_reason: "ScaleUpLimit",
            ..Case::default()
        },
        Case {
            name: "check 'outdated' flag for events for one behavior for up",
            min: 1,
            max: 1000,
            up: Some(g(1000, 60, 0, 0, 0)),
            up_events: e(&[8, 12, 9, 11]),
            current: 100,
            desired: 200,
            want: 200,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        Case {
            name: "check that events were not marked 'outdated' for two different policies in the behavior for up",
            min: 1,
            max: 1000,
            up: Some(g(1000, 120, 100, 60, 0)),
            up_events: e(&[8, 12, 9, 11]),
            current: 100,
            desired: 200,
            want: 200,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        Case {
            name: "check that events were marked 'outdated' for two different policies in the behavior for up",
            min: 1,
            max: 1000,
            up: Some(g(1000, 30, 100, 60, 0)),
            up_events: e(&[8, 12, 9, 11]),
            current: 100,
            desired: 200,
            want: 200,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        Case {
            name: "scaleDown with default policy and previous events",
            min: 1,
            max: 1000,
            down_events: e(&[1, 5, 9]),
            current: 10,
            desired: 5,
            want: 5,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        Case {
            name: "scaleDown with spec MinReplicas=nil limitation with large pod policy and previous events",
            min: 1,
            max: 1000,
            down: Some(g(115, 120, 0, 0, 300)),
            down_events: e(&[1, 5, 9]),
            current: 100,
            desired: 0,
            want: 1,
            want_reason: "TooFewReplicas",
            ..Case::default()
        },
        Case {
            name: "scaleDown with spec MinReplicas limitation with large pod policy and previous events",
            min: 5,
            max: 1000,
            down: Some(g(130, 120, 0, 0, 300)),
            down_events: e(&[1, 5, 9]),
            current: 100,
            desired: 0,
            want: 5,
            want_reason: "TooFewReplicas",
            ..Case::default()
        },
        Case {
            name: "scaleDown with spec MinReplicas limitation with large percent policy and previous events",
            min: 5,
            max: 1000,
            down: Some(g(0, 0, 100, 120, 300)),
            down_events: e(&[1, 5, 9]),
            current: 100,
            desired: 2,
            want: 5,
            want_reason: "TooFewReplicas",
            ..Case::default()
        },
        Case {
            name: "scaleDown with pod policy limitation and previous events",
            min: 1,
            max: 1000,
            down: Some(g(5, 120, 0, 0, 300)),
            down_events: e(&[1, 5, 9]),
            current: 100,
            desired: 2,
            want: 100,
            want_reason: "ScaleDownLimit",
            ..Case::default()
        },
        Case {
            name: "scaleDown with percent policy limitation and previous events",
            min: 1,
            max: 1000,
            down: Some(g(0, 0, 50, 120, 300)),
            down_events: e(&[2, 4, 6]),
            current: 100,
            desired: 0,
            want: 56,
            want_reason: "ScaleDownLimit",
            ..Case::default()
        },
        Case {
            name: "scaleDown with previous events preventing further scale down",
            min: 1,
            max: 1000,
            down: Some(g(0, 0, 10, 120, 300)),
            down_events: e(&[10, 10, 10]),
            current: 100,
            desired: 0,
            want: 100,
            want_reason: "ScaleDownLimit",
            ..Case::default()
        },
        Case {
            name: "scaleDown with with previous events still allowing more scale down",
            min: 1,
            max: 1000,
            down: Some(g(0, 0, 1000, 120, 300)),
            down_events: e(&[10, 10, 10]),
            current: 10,
            desired: 5,
            want: 5,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        Case {
            name: "check 'outdated' flag for events for one behavior for down",
            min: 1,
            max: 1000,
            down: Some(g(1000, 60, 0, 0, 300)),
            down_events: e(&[8, 12, 9, 11]),
            current: 100,
            desired: 5,
            want: 5,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        Case {
            name: "check that events were not marked 'outdated' for two different policies in the behavior for down",
            min: 1,
            max: 1000,
            down: Some(g(1000, 120, 100, 60, 300)),
            down_events: e(&[8, 12, 9, 11]),
            current: 100,
            desired: 5,
            want: 5,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        Case {
            name: "check that events were marked 'outdated' for two different policies in the behavior for down",
            min: 1,
            max: 1000,
            down: Some(g(1000, 30, 100, 60, 300)),
            down_events: e(&[8, 12, 9, 11]),
            current: 100,
            desired: 5,
            want: 5,
            want_reason: "DesiredWithinRange",
            ..Case::default()
        },
        // Newer upstream cases with both event lists.
        Case {
            name: "scaleUp with percent policy and previous scale up and down events",
            min: 1,
            max: 1000,
            up: Some(g(0, 0, 300, 300, 0)),
            up_events: e(&[4]),
            down_events: e(&[2]),
            current: 6,
            desired: 24,
            want: 16,
            want_reason: "ScaleUpLimit",
            ..Case::default()
        },
        Case {
            name: "scaleDown with percent policy and previous scale up and down events",
            min: 1,
            max: 1000,
            down: Some(g(0, 0, 50, 180, 0)),
            up_events: e(&[2]),
            down_events: e(&[4]),
            current: 10,
            desired: 1,
            want: 6,
            want_reason: "ScaleDownLimit",
            ..Case::default()
        },
    ];

    for k in cases {
        let behavior = HorizontalPodAutoscalerBehavior {
            scale_up: k.up.as_ref().map(to_api),
            scale_down: k.down.as_ref().map(to_api),
        };
        let eff = EffectiveBehavior::new(&behavior, SignedDuration::from_mins(5));
        let got = convert_desired_replicas_with_behavior_rate(
            k.current,
            k.desired,
            k.min,
            k.max,
            &eff,
            &k.up_events,
            &k.down_events,
            n,
        );
        assert_eq!(got.replicas, k.want, "{}", k.name);
        assert_eq!(got.reason.as_str(), k.want_reason, "{}", k.name);
    }
}

/// Scale-up and scale-down events both move the period start (newer upstream passes
/// both lists). Expected values derived from the arithmetic of `calculateScaleUpLimitWithScalingRules` and `calculateScaleDownLimitWithBehaviors`.
#[test]
fn both_event_lists_shift_the_period_start() {
    let n = now();
    let up = events_uniform(&[1, 5, 9], 120, n); // +15 in the last 120s
    let down = events_uniform(&[2, 4, 6], 120, n); // -12 in the last 120s
    // Pods 150 per 120s: start = 100 - 15 + 12 = 97, limit 247.
    let rules = generate_scaling_rules(150, 120, 0, 0, 0);
    assert_eq!(
        calculate_scale_up_limit_with_scaling_rules(100, &up, &down, &rules, n),
        247
    );
    // Percent 50 per 120s down: start 97, floor(97 * 0.5) = 48.
    let rules = generate_scaling_rules(0, 0, 50, 120, 0);
    assert_eq!(
        calculate_scale_down_limit_with_behaviors(100, &up, &down, &rules, n),
        48
    );
}
