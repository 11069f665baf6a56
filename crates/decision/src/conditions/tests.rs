use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

#[test]
fn transition_time_changes_only_with_status() {
    let t0 = ts("2025-01-01T00:00:00Z");
    let t1 = ts("2025-01-01T00:00:15Z");
    let t2 = ts("2025-01-01T00:00:30Z");
    let mut list = Vec::new();
    set_condition(&mut list, &HpaCondition::SucceededGetScale, t0);
    set_condition(
        &mut list,
        &HpaCondition::ValidMetricFound {
            metric: "cpu resource".into(),
        },
        t0,
    );
    set_condition(
        &mut list,
        &HpaCondition::ScalingLimited {
            limited: false,
            reason: LimitReason::DesiredWithinRange,
        },
        t0,
    );
    assert_eq!(
        list.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(),
        ["AbleToScale", "ScalingActive", "ScalingLimited"]
    );
    // Same status, new reason: time kept.
    set_condition(
        &mut list,
        &HpaCondition::Stabilization(StabilizationReason::ReadyForNewScale),
        t1,
    );
    assert_eq!(list[0].last_transition_time, Some(Time(t0)));
    assert_eq!(list[0].reason.as_deref(), Some("ReadyForNewScale"));
    assert_eq!(
        list[0].message.as_deref(),
        Some("recommended size matches current size")
    );
    // Status flips: time stamped.
    set_condition(
        &mut list,
        &HpaCondition::FailedUpdateScale { err: "nope".into() },
        t2,
    );
    assert_eq!(list[0].last_transition_time, Some(Time(t2)));
    assert_eq!(list[0].status, "False");
    assert_eq!(
        list[0].message.as_deref(),
        Some("the HPA controller was unable to update the target scale: nope")
    );
    assert_eq!(list.len(), 3);
}

#[test]
fn catalogue_messages() {
    struct Case {
        condition: HpaCondition,
        type_: &'static str,
        status: &'static str,
        reason: &'static str,
        message: &'static str,
    }
    let cases = vec![
        Case {
            condition: HpaCondition::FailedGetScale {
                err: "unrecognized resource".into(),
            },
            type_: "AbleToScale",
            status: "False",
            reason: "FailedGetScale",
            message: "the HPA controller was unable to get the target's current scale: unrecognized resource",
        },
        Case {
            condition: HpaCondition::SucceededGetScale,
            type_: "AbleToScale",
            status: "True",
            reason: "SucceededGetScale",
            message: "the HPA controller was able to get the target's current scale",
        },
        Case {
            condition: HpaCondition::Stabilization(StabilizationReason::ScaleDownStabilized),
            type_: "AbleToScale",
            status: "True",
            reason: "ScaleDownStabilized",
            message: "recent recommendations were higher than current one, applying the highest recent recommendation",
        },
        Case {
            condition: HpaCondition::Stabilization(StabilizationReason::ScaleUpStabilized),
            type_: "AbleToScale",
            status: "True",
            reason: "ScaleUpStabilized",
            message: "recent recommendations were lower than current one, applying the lowest recent recommendation",
        },
        Case {
            condition: HpaCondition::SucceededRescale { replicas: 7 },
            type_: "AbleToScale",
            status: "True",
            reason: "SucceededRescale",
            message: "the HPA controller was able to update the target scale to 7",
        },
        Case {
            condition: HpaCondition::ScalingDisabled,
            type_: "ScalingActive",
            status: "False",
            reason: "ScalingDisabled",
            message: "scaling is disabled since the replica count of the target is zero",
        },
        Case {
            condition: HpaCondition::MissingSelector,
            type_: "ScalingActive",
            status: "False",
            reason: "InvalidSelector",
            message: "the HPA target's scale is missing a selector",
        },
        Case {
            condition: HpaCondition::InvalidSelector { err: "bad".into() },
            type_: "ScalingActive",
            status: "False",
            reason: "InvalidSelector",
            message: "couldn't convert selector into a corresponding internal selector object: bad",
        },
        Case {
            condition: HpaCondition::AmbiguousSelector {
                selector: "app=web".into(),
                hpas: vec!["default/hpa-a".into(), "default/hpa-b".into()],
            },
            type_: "ScalingActive",
            status: "False",
            reason: "AmbiguousSelector",
            message: "pods by selector app=web are controlled by multiple HPAs: [default/hpa-a default/hpa-b]",
        },
        Case {
            condition: HpaCondition::FailedComputeMetric {
                reason: MetricFailureReason::FailedGetResourceMetric,
                err: "failed to get cpu utilization: boom".into(),
            },
            type_: "ScalingActive",
            status: "False",
            reason: "FailedGetResourceMetric",
            message: "the HPA was unable to compute the replica count: failed to get cpu utilization: boom",
        },
        Case {
            condition: HpaCondition::ValidMetricFound {
                metric: "pods metric qps".into(),
            },
            type_: "ScalingActive",
            status: "True",
            reason: "ValidMetricFound",
            message: "the HPA was able to successfully calculate a replica count from pods metric qps",
        },
        Case {
            condition: HpaCondition::ScalingLimited {
                limited: true,
                reason: LimitReason::TooFewReplicas,
            },
            type_: "ScalingLimited",
            status: "True",
            reason: "TooFewReplicas",
            message: "the desired replica count is less than the minimum replica count",
        },
        Case {
            condition: HpaCondition::ScalingLimited {
                limited: true,
                reason: LimitReason::ScaleDownLimit,
            },
            type_: "ScalingLimited",
            status: "True",
            reason: "ScaleDownLimit",
            message: "the desired replica count is decreasing faster than the maximum scale rate",
        },
    ];
    for case in cases {
        let c = &case.condition;
        assert_eq!(
            (
                c.type_str(),
                c.status_str(),
                c.reason(),
                c.message().as_str()
            ),
            (case.type_, case.status, case.reason, case.message)
        );
    }
}

#[test]
fn percent_in_error_text_is_kept_verbatim() {
    // v1.32+ passes pre-formatted texts with "%s" (kubernetes/kubernetes#127422).
    let c = HpaCondition::FailedComputeMetric {
        reason: MetricFailureReason::FailedGetExternalMetric,
        err: "usage 50%d".into(),
    };
    assert_eq!(
        c.message(),
        "the HPA was unable to compute the replica count: usage 50%d"
    );
    let c = HpaCondition::InvalidSelector {
        err: "bad %s".into(),
    };
    assert_eq!(
        c.message(),
        "couldn't convert selector into a corresponding internal selector object: bad %s"
    );
    let c = HpaCondition::FailedGetScale { err: "50%d".into() };
    assert_eq!(
        c.message(),
        "the HPA controller was unable to get the target's current scale: 50%d"
    );
}
