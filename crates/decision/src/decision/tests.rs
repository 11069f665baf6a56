use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HPAScalingPolicy, HPAScalingRules,
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::conditions::LimitReason;

fn now() -> Timestamp {
    "2025-06-01T12:00:00Z".parse().unwrap()
}

fn hpa(
    min: Option<i32>,
    max: i32,
    behavior: Option<HorizontalPodAutoscalerBehavior>,
) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: HorizontalPodAutoscalerSpec {
            min_replicas: min,
            max_replicas: max,
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: "web".into(),
            },
            behavior,
            metrics: None,
        },
        status: None,
    }
}

fn ok(replicas: i32, name: &str) -> MetricResult {
    MetricResult {
        metric_type: "Resource".into(),
        status: MetricStatus {
            type_: "Resource".into(),
            ..Default::default()
        },
        outcome: Ok(MetricProposal {
            replicas,
            metric_name: name.into(),
            timestamp: Some(now()),
            detail: None,
        }),
    }
}

fn failed(reason: MetricFailureReason, inner: &str, outer: &str) -> MetricResult {
    MetricResult {
        metric_type: "External".into(),
        status: MetricStatus::default(),
        outcome: Err(MetricFailure {
            reason,
            condition_error: inner.into(),
            error: outer.into(),
            kind: ErrorKind::Internal,
            source: Some(ErrorSource::message(inner)),
        }),
    }
}

fn input<'a>(h: &'a HorizontalPodAutoscaler, current: i32) -> DecisionInput<'a> {
    DecisionInput {
        key: "default/web",
        hpa: h,
        current_replicas: current,
        now: now(),
        tolerances: None,
    }
}

#[test]
fn branches() {
    assert_eq!(Branch::classify(0, 1, 10), Branch::ScalingDisabled);
    assert_eq!(Branch::classify(0, 0, 10), Branch::FromMetrics);
    assert_eq!(Branch::classify(11, 1, 10), Branch::AboveMax);
    assert_eq!(Branch::classify(1, 2, 10), Branch::BelowMin);
    assert_eq!(Branch::classify(5, 2, 10), Branch::FromMetrics);
}

fn with_zero_state(
    min: i32,
    metric_type: &str,
    scaled_to_zero: Option<&str>,
) -> HorizontalPodAutoscaler {
    let mut h = hpa(Some(min), 10, None);
    h.spec.metrics = Some(vec![k8s_openapi::api::autoscaling::v2::MetricSpec {
        type_: metric_type.into(),
        ..Default::default()
    }]);
    h.status = scaled_to_zero.map(|st| HorizontalPodAutoscalerStatus {
        conditions: Some(vec![
            k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerCondition {
                type_: "ScaledToZero".into(),
                status: st.into(),
                ..Default::default()
            },
        ]),
        ..Default::default()
    });
    h
}

#[test]
fn zero_replicas_rules_per_version() {
    let v135 = DecisionConfig::default();
    let on = DecisionConfig {
        zero_replicas: ZeroReplicas::ScaledToZeroCondition { gate: true },
        ..DecisionConfig::default()
    };
    let off = DecisionConfig {
        zero_replicas: ZeroReplicas::ScaledToZeroCondition { gate: false },
        ..DecisionConfig::default()
    };
    let manual = with_zero_state(0, "External", None);
    let ours = with_zero_state(0, "External", Some("True"));
    let ours_cpu = with_zero_state(0, "Resource", Some("True"));
    let ours_min = with_zero_state(2, "Resource", Some("True"));
    let was_ours = with_zero_state(0, "Object", Some("False"));
    // 1.35: minReplicas alone decides.
    assert_eq!(Branch::for_hpa(&manual, 0, &v135), Branch::FromMetrics);
    assert_eq!(
        Branch::for_hpa(&ours_min, 0, &v135),
        Branch::ScalingDisabled
    );
    // 1.36+: the condition decides, read only with the gate on.
    assert_eq!(Branch::for_hpa(&manual, 0, &on), Branch::ScalingDisabled);
    assert_eq!(Branch::for_hpa(&ours, 0, &on), Branch::FromMetrics);
    assert_eq!(Branch::for_hpa(&ours, 0, &off), Branch::ScalingDisabled);
    assert_eq!(Branch::for_hpa(&ours_cpu, 0, &on), Branch::ScalingDisabled);
    assert_eq!(Branch::for_hpa(&ours_min, 0, &on), Branch::FromMetrics);
    assert_eq!(Branch::for_hpa(&was_ours, 0, &on), Branch::ScalingDisabled);
    // Above zero nothing changes.
    assert_eq!(Branch::for_hpa(&manual, 3, &on), Branch::FromMetrics);
}

#[test]
fn scaled_to_zero_condition_after_a_rescale() {
    let on = DecisionConfig {
        downscale_stabilization_window: SignedDuration::ZERO,
        zero_replicas: ZeroReplicas::ScaledToZeroCondition { gate: true },
        observed_generation: false,
    };
    let h = with_zero_state(0, "External", None);
    let state = HpaState::new();
    let d = decide(
        &state,
        &on,
        input(&h, 3),
        Some(MetricsOutcome::from_results(3, vec![ok(0, "q")])),
    );
    assert_eq!(
        (d.desired_replicas, d.scaled_to_zero_after_rescale),
        (0, Some(true))
    );
    let out = d.complete(
        &state,
        &HorizontalPodAutoscalerStatus::default(),
        RescaleResult::Succeeded,
    );
    let c = out
        .status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "ScaledToZero")
        .unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref(), c.message.as_deref()),
        (
            "True",
            Some("ScaledToZero"),
            Some("the HPA controller scaled the workload to zero")
        )
    );
    // A failed scale write sets no ScaledToZero condition.
    let out = d.complete(
        &state,
        &HorizontalPodAutoscalerStatus::default(),
        RescaleResult::Failed("boom".into()),
    );
    assert!(
        !out.status
            .conditions
            .unwrap()
            .iter()
            .any(|c| c.type_ == "ScaledToZero")
    );
    // Any other rescale: False/NotScaledToZero; no rescale, no condition.
    let d = decide(
        &state,
        &on,
        input(&h, 3),
        Some(MetricsOutcome::from_results(3, vec![ok(5, "q")])),
    );
    assert_eq!(d.scaled_to_zero_after_rescale, Some(false));
    let d = decide(
        &state,
        &on,
        input(&h, 5),
        Some(MetricsOutcome::from_results(5, vec![ok(5, "q")])),
    );
    assert_eq!((d.rescale, d.scaled_to_zero_after_rescale), (false, None));
    // 1.35 never writes it.
    let d = decide(
        &HpaState::new(),
        &DecisionConfig::default(),
        input(&h, 3),
        Some(MetricsOutcome::from_results(3, vec![ok(0, "q")])),
    );
    assert_eq!(d.scaled_to_zero_after_rescale, None);
}

#[test]
fn aggregation_rules() {
    // Max of proposals, ties keep the earlier name, zero is replaced.
    let m = MetricsOutcome::from_results(3, vec![ok(0, "a"), ok(4, "b"), ok(4, "c")]);
    assert_eq!((m.replicas, m.metric_name.as_str()), (4, "b"));
    assert_eq!(
        m.condition,
        Some(HpaCondition::ValidMetricFound { metric: "b".into() })
    );
    // Some invalid, valid ones scale up: act, keep the partial error.
    let m = MetricsOutcome::from_results(
        3,
        vec![
            failed(
                MetricFailureReason::FailedGetExternalMetric,
                "inner",
                "outer",
            ),
            ok(5, "cpu"),
        ],
    );
    assert_eq!(m.replicas, 5);
    assert_eq!(
        m.error.as_deref(),
        Some("invalid metrics (1 invalid out of 2), first error is: outer")
    );
    assert_eq!(m.events.len(), 1);
    assert!(!m.is_total_failure());
    // Some invalid, valid ones scale down: cannot act.
    let m = MetricsOutcome::from_results(
        5,
        vec![
            failed(
                MetricFailureReason::FailedGetExternalMetric,
                "inner",
                "outer",
            ),
            ok(2, "cpu"),
        ],
    );
    assert!(m.is_total_failure());
    assert_eq!(
        m.condition.as_ref().map(HpaCondition::reason),
        Some("FailedGetExternalMetric")
    );
    assert_eq!(
        m.condition.as_ref().map(HpaCondition::message).as_deref(),
        Some("the HPA was unable to compute the replica count: inner")
    );
    assert_eq!(m.statuses.as_ref().map(Vec::len), Some(2));
    // Empty spec: -1 with no error and the empty condition.
    let m = MetricsOutcome::from_results(5, vec![]);
    assert_eq!(
        (m.replicas, m.error.clone(), m.condition.clone()),
        (-1, None, Some(HpaCondition::Empty))
    );
}

/// The aggregated error keeps the first failed metric (not a later one) as its source, and
/// through it the error the metric's computation returned.
#[test]
fn aggregated_error_keeps_the_first_failure_and_its_source() {
    let m = MetricsOutcome::from_results(
        5,
        vec![
            ok(2, "cpu"),
            failed(
                MetricFailureReason::FailedGetExternalMetric,
                "first inner",
                "first outer",
            ),
            failed(
                MetricFailureReason::FailedGetObjectMetric,
                "second inner",
                "second outer",
            ),
        ],
    );
    let source = m.error_source.as_ref().map(ErrorSource::as_error);
    assert_eq!(
        source.map(ToString::to_string).as_deref(),
        Some("first outer")
    );
    let cause = source.and_then(|e| e.source()).map(ToString::to_string);
    assert_eq!(cause.as_deref(), Some("first inner"));
    // Nothing failed: nothing to keep.
    let m = MetricsOutcome::from_results(5, vec![ok(2, "cpu")]);
    assert!(m.error_source.is_none());
    // A selector that does not parse is kept; a missing one is only a text upstream.
    let m = MetricsOutcome::selector_failure(SelectorFailure::Invalid(ErrorSource::message(
        "couldn't parse the selector string \"a==\"",
    )));
    assert_eq!(
        m.error_source.map(|e| e.to_string()).as_deref(),
        Some("couldn't parse the selector string \"a==\"")
    );
    assert!(
        MetricsOutcome::selector_failure(SelectorFailure::Missing)
            .error_source
            .is_none()
    );
}

#[test]
fn worked_example_message_chain() {
    // CPU utilization with metrics-server down (`computeReplicasForMetric`'s failure path).
    let inner = "failed to get cpu utilization: unable to get metrics for resource cpu: unable to fetch metrics from resource metrics API: boom";
    let outer = format!("failed to get cpu resource metric value: {inner}");
    let h = hpa(Some(1), 10, None);
    let state = HpaState::new();
    let m = MetricsOutcome::from_results(
        3,
        vec![failed(
            MetricFailureReason::FailedGetResourceMetric,
            inner,
            &outer,
        )],
    );
    let d = decide(&state, &DecisionConfig::default(), input(&h, 3), Some(m));
    assert_eq!(
        d.failure.as_deref(),
        Some(format!("failed to compute desired number of replicas based on listed metrics for Deployment/default/web: invalid metrics (1 invalid out of 1), first error is: {outer}").as_str())
    );
    let prev = HorizontalPodAutoscalerStatus {
        desired_replicas: 4,
        current_replicas: Some(4),
        ..Default::default()
    };
    let o = d.complete(&state, &prev, RescaleResult::NotAttempted);
    assert_eq!(
        o.events,
        vec![HpaEvent::FailedGetMetric {
            reason: MetricFailureReason::FailedGetResourceMetric,
            err: inner.into()
        }]
    );
    assert_eq!(
        o.events_after_status,
        vec![HpaEvent::FailedComputeMetricsReplicas {
            err: format!("invalid metrics (1 invalid out of 1), first error is: {outer}")
        }]
    );
    // Previous desired kept; current updated; one zero-value metric status.
    assert_eq!(
        (o.status.desired_replicas, o.status.current_replicas),
        (4, Some(3))
    );
    assert_eq!(
        o.status
            .current_metrics
            .as_ref()
            .map(|v| v[0].type_.as_str()),
        Some("")
    );
    let conds = o.status.conditions.clone().unwrap();
    assert_eq!(
        conds
            .iter()
            .map(|c| (
                c.type_.as_str(),
                c.status.as_str(),
                c.reason.as_deref().unwrap()
            ))
            .collect::<Vec<_>>(),
        vec![
            ("AbleToScale", "True", "SucceededGetScale"),
            ("ScalingActive", "False", "FailedGetResourceMetric")
        ]
    );
    assert_eq!(o.action, ActionLabel::None);
    assert_eq!(o.error_label(), ErrorLabel::Internal);
}

#[test]
fn scale_up_legacy_path() {
    let h = hpa(Some(1), 10, None);
    let state = HpaState::new();
    let m = MetricsOutcome::from_results(
        3,
        vec![ok(50, "cpu resource utilization (percentage of request)")],
    );
    let d = decide(&state, &DecisionConfig::default(), input(&h, 3), Some(m));
    assert_eq!(
        d.rescale_reason,
        "cpu resource utilization (percentage of request) above target"
    );
    assert_eq!((d.desired_replicas, d.rescale), (6, true));
    assert_eq!(
        d.normalization.as_ref().unwrap().limit,
        LimitReason::ScaleUpLimit
    );
    let text = d.explain();
    assert!(
        text.contains(
            "metric[0] Resource: cpu resource utilization (percentage of request) proposes 50"
        ),
        "{text}"
    );
    assert!(text.contains("normalize: prenormalized=50 stabilized=50 (ReadyForNewScale) rate_limit=Some(6) -> 6 (ScaleUpLimit)"), "{text}");
    let o = d.complete(
        &state,
        &HorizontalPodAutoscalerStatus::default(),
        RescaleResult::Succeeded,
    );
    assert_eq!(o.action, ActionLabel::ScaleUp);
    assert_eq!(o.status.desired_replicas, 6);
    assert_eq!(o.status.last_scale_time.as_ref().map(|t| t.0), Some(now()));
    assert_eq!(
        o.events,
        vec![HpaEvent::SuccessfulRescale {
            new_size: 6,
            reason: "cpu resource utilization (percentage of request) above target".into()
        }]
    );
    let conds = o.status.conditions.unwrap();
    assert_eq!(
        conds
            .iter()
            .map(|c| (c.type_.as_str(), c.reason.as_deref().unwrap()))
            .collect::<Vec<_>>(),
        vec![
            ("AbleToScale", "SucceededRescale"),
            ("ScalingActive", "ValidMetricFound"),
            ("ScalingLimited", "ScaleUpLimit")
        ]
    );
    assert_eq!(
        conds[0].message.as_deref(),
        Some("the HPA controller was able to update the target scale to 6")
    );
    assert!(o.status_changed);
    // No behavior: no scale events.
    assert!(state.scale_up_events("default/web").is_empty());
    assert!(d.log_lines()[0].starts_with("\"Proposing desired replicas\" desiredReplicas=50 metric=\"cpu resource utilization (percentage of request)\" timestamp=\"2025-06-01 12:00:00 +0000 UTC\""));
}

#[test]
fn steady_state_writes_nothing() {
    let h = hpa(Some(1), 10, None);
    let state = HpaState::new();
    let run = |prev: &HorizontalPodAutoscalerStatus| {
        let m = MetricsOutcome::from_results(3, vec![ok(3, "cpu resource")]);
        let d = decide(&state, &DecisionConfig::default(), input(&h, 3), Some(m));
        assert!(!d.rescale);
        d.complete(&state, prev, RescaleResult::NotAttempted)
    };
    let first = run(&HorizontalPodAutoscalerStatus::default());
    assert!(first.status_changed);
    assert_eq!(first.status.desired_replicas, 3);
    let second = run(&first.status);
    assert!(!second.status_changed);
    let d = decide(
        &state,
        &DecisionConfig::default(),
        input(&h, 3),
        Some(MetricsOutcome::from_results(3, vec![ok(3, "cpu resource")])),
    );
    assert_eq!(
        d.log_lines()[1],
        "\"Decided not to scale\" scaleTarget=\"Deployment/default/web\" desiredReplicas=3 lastScaleTime=<nil>"
    );
}

#[test]
fn branch_b_and_behavior_scale_events() {
    let behavior = HorizontalPodAutoscalerBehavior {
        scale_down: Some(HPAScalingRules {
            policies: Some(vec![HPAScalingPolicy {
                type_: "Pods".into(),
                value: 1,
                period_seconds: 60,
            }]),
            ..Default::default()
        }),
        scale_up: None,
    };
    let h = hpa(Some(1), 5, Some(behavior));
    let state = HpaState::new();
    let d = decide(&state, &DecisionConfig::default(), input(&h, 8), None);
    assert_eq!(
        (d.branch, d.desired_replicas, d.rescale),
        (Branch::AboveMax, 5, true)
    );
    assert_eq!(d.rescale_reason, REASON_ABOVE_MAX);
    let o = d.complete(
        &state,
        &HorizontalPodAutoscalerStatus::default(),
        RescaleResult::Succeeded,
    );
    assert_eq!(o.action, ActionLabel::ScaleDown);
    assert_eq!(o.status.current_metrics, None);
    // Branch b stores a scale event when behavior is set (`reconcileAutoscaler` calls `storeScaleEvent` on every rescale).
    assert_eq!(state.scale_down_events("default/web")[0].replica_change, 3);
    assert_eq!(o.status.conditions.as_ref().map(Vec::len), Some(1));
}

#[test]
fn scaling_disabled_and_rescale_failure() {
    let h = hpa(Some(2), 10, None);
    let state = HpaState::new();
    let d = decide(&state, &DecisionConfig::default(), input(&h, 0), None);
    assert!(!d.rescale);
    let o = d.complete(
        &state,
        &HorizontalPodAutoscalerStatus::default(),
        RescaleResult::NotAttempted,
    );
    assert_eq!(o.status.desired_replicas, 0);
    assert_eq!(
        o.status.conditions.as_ref().unwrap()[1].reason.as_deref(),
        Some("ScalingDisabled")
    );

    let d = decide(&state, &DecisionConfig::default(), input(&h, 1), None);
    assert_eq!(d.rescale_reason, REASON_BELOW_MIN);
    let prev = HorizontalPodAutoscalerStatus {
        desired_replicas: 7,
        ..Default::default()
    };
    let o = d.complete(&state, &prev, RescaleResult::Failed("conflict".into()));
    assert_eq!(
        o.error.as_deref(),
        Some("failed to rescale Deployment/default/web: conflict")
    );
    assert_eq!(
        o.events,
        vec![HpaEvent::FailedRescale {
            new_size: 2,
            reason: REASON_BELOW_MIN.into(),
            err: "conflict".into()
        }]
    );
    assert_eq!(o.status.desired_replicas, 7);
    assert_eq!(o.status.last_scale_time, None);
    assert_eq!(o.action, ActionLabel::None);
}

#[test]
fn selector_failures() {
    let m = MetricsOutcome::selector_failure(SelectorFailure::Missing);
    assert_eq!(m.error.as_deref(), Some("selector is required"));
    assert_eq!(m.events, vec![HpaEvent::SelectorRequired]);
    let m = MetricsOutcome::selector_failure(SelectorFailure::Ambiguous {
        selector: "app=web".into(),
        hpas: vec!["default/a".into(), "default/b".into()],
    });
    assert_eq!(
        m.error.as_deref(),
        Some("pods by selector app=web are controlled by multiple HPAs: [default/a default/b]")
    );
    assert_eq!(m.statuses, None);
    let m = MetricsOutcome::selector_failure(SelectorFailure::PodList(ErrorSource::message(
        "list failed",
    )));
    assert!(m.events.is_empty() && m.condition.is_none());
}

#[test]
fn minreplicas_zero_scales_to_zero() {
    let h = hpa(Some(0), 10, None);
    let state = HpaState::new();
    // With a zero window the initial recommendation (recorded earlier in the same
    // reconcile, at the same virtual instant) is already outside the window, as upstream.
    let m = MetricsOutcome::from_results(2, vec![ok(0, "external metric q(nil)")]);
    let cfg = DecisionConfig {
        downscale_stabilization_window: SignedDuration::ZERO,
        ..DecisionConfig::default()
    };
    let d = decide(&state, &cfg, input(&h, 2), Some(m));
    assert_eq!(
        (d.desired_replicas, d.rescale_reason.as_str()),
        (0, REASON_ALL_METRICS_BELOW)
    );
    assert_eq!(d.rescale_metric, "");
}

fn conds(o: &Outcome) -> Vec<(String, String, String)> {
    o.status
        .conditions
        .iter()
        .flatten()
        .map(|c| {
            (
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn want(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    list.iter()
        .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
        .collect()
}

fn cheddar() -> MetricResult {
    MetricResult {
        metric_type: "CheddarCheese".into(),
        status: MetricStatus::default(),
        outcome: Err(MetricFailure::unknown_metric_source_type("CheddarCheese")),
    }
}

fn external_failed() -> MetricResult {
    let inner = "unable to get external metric default/qps/&LabelSelector{MatchLabels:map[string]string{},MatchExpressions:[]LabelSelectorRequirement{},}: something went wrong";
    let mut r = failed(
        MetricFailureReason::FailedGetExternalMetric,
        &format!("failed to get external metric qps: {inner}"),
        &format!(
            "failed to get qps external metric value: failed to get external metric qps: {inner}"
        ),
    );
    r.metric_type = "External".into();
    r
}

/// Ports of upstream controller tests, driven through the decision core with the
/// proposals their fixtures produce: CPU levels 100,300,500,250,250 mCPU on 1-CPU requests
/// at a 50% target give ceil(0.56 * 5) = 3; levels 300,400,500 at a 30% target give
/// ceil(1.33 * 3) = 4.
#[test]
fn upstream_no_scale_down_one_metric_invalid() {
    // TestNoScaleDownOneMetricInvalid: min 2, max 6, spec replicas 5.
    let h = hpa(Some(2), 6, None);
    let state = HpaState::new();
    let results = vec![
        ok(3, "cpu resource utilization (percentage of request)"),
        cheddar(),
    ];
    assert_eq!(results[0].action_label(5), ActionLabel::ScaleDown);
    assert_eq!(
        (results[1].action_label(5), results[1].error_label()),
        (ActionLabel::None, ErrorLabel::Spec)
    );
    let m = MetricsOutcome::from_results(5, results);
    let d = decide(&state, &DecisionConfig::default(), input(&h, 5), Some(m));
    let prev = HorizontalPodAutoscalerStatus {
        current_replicas: Some(5),
        desired_replicas: 5,
        ..Default::default()
    };
    let o = d.complete(&state, &prev, RescaleResult::NotAttempted);
    assert_eq!(o.status.desired_replicas, 5);
    assert_eq!(
        conds(&o),
        want(&[
            ("AbleToScale", "True", "SucceededGetScale"),
            ("ScalingActive", "False", "InvalidMetricSourceType")
        ])
    );
    assert_eq!(
        (o.action, o.error_label()),
        (ActionLabel::None, ErrorLabel::Internal)
    );
    assert_eq!(
        o.events,
        vec![HpaEvent::FailedGetMetric {
            reason: MetricFailureReason::InvalidMetricSourceType,
            err: "unknown metric source type \"CheddarCheese\"".into()
        }]
    );
}

#[test]
fn upstream_no_scale_down_one_metric_empty() {
    // TestNoScaleDownOneMetricEmpty.
    let h = hpa(Some(2), 6, None);
    let state = HpaState::new();
    let m = MetricsOutcome::from_results(
        5,
        vec![
            ok(3, "cpu resource utilization (percentage of request)"),
            external_failed(),
        ],
    );
    let d = decide(&state, &DecisionConfig::default(), input(&h, 5), Some(m));
    let o = d.complete(
        &state,
        &HorizontalPodAutoscalerStatus {
            desired_replicas: 5,
            ..Default::default()
        },
        RescaleResult::NotAttempted,
    );
    assert_eq!(o.status.desired_replicas, 5);
    assert_eq!(
        conds(&o),
        want(&[
            ("AbleToScale", "True", "SucceededGetScale"),
            ("ScalingActive", "False", "FailedGetExternalMetric")
        ])
    );
    assert_eq!(
        (o.action, o.error_label()),
        (ActionLabel::None, ErrorLabel::Internal)
    );
}

#[test]
fn upstream_scale_up_one_metric_empty() {
    // TestScaleUpOneMetricEmpty: spec replicas 3, CPU proposes 4, External fails.
    let h = hpa(Some(2), 6, None);
    let state = HpaState::new();
    let m = MetricsOutcome::from_results(
        3,
        vec![
            ok(4, "cpu resource utilization (percentage of request)"),
            external_failed(),
        ],
    );
    let d = decide(&state, &DecisionConfig::default(), input(&h, 3), Some(m));
    assert_eq!((d.desired_replicas, d.rescale), (4, true));
    let o = d.complete(
        &state,
        &HorizontalPodAutoscalerStatus::default(),
        RescaleResult::Succeeded,
    );
    assert_eq!(o.status.desired_replicas, 4);
    assert_eq!(
        (o.action, o.error_label()),
        (ActionLabel::ScaleUp, ErrorLabel::Internal)
    );
    assert_eq!(
        conds(&o),
        want(&[
            ("AbleToScale", "True", "SucceededRescale"),
            ("ScalingActive", "True", "ValidMetricFound"),
            ("ScalingLimited", "False", "DesiredWithinRange")
        ])
    );
    // The failing metric's event is still emitted (`computeReplicasForMetrics` records it before aggregating).
    assert_eq!(o.events[0].reason(), "FailedGetExternalMetric");
    assert_eq!(o.events[1].reason(), "SuccessfulRescale");
}

#[test]
fn upstream_scale_up_both_metrics_empty() {
    // TestScaleUpBothMetricsEmpty: only an unknown metric type.
    let h = hpa(Some(2), 6, None);
    let state = HpaState::new();
    let m = MetricsOutcome::from_results(3, vec![cheddar()]);
    let d = decide(&state, &DecisionConfig::default(), input(&h, 3), Some(m));
    let o = d.complete(
        &state,
        &HorizontalPodAutoscalerStatus {
            desired_replicas: 3,
            ..Default::default()
        },
        RescaleResult::NotAttempted,
    );
    assert_eq!(o.status.desired_replicas, 3);
    assert_eq!(
        conds(&o),
        want(&[
            ("AbleToScale", "True", "SucceededGetScale"),
            ("ScalingActive", "False", "InvalidMetricSourceType")
        ])
    );
    assert_eq!(
        o.error.as_deref(),
        Some(
            "failed to compute desired number of replicas based on listed metrics for Deployment/default/web: invalid metrics (1 invalid out of 1), first error is: unknown metric source type \"CheddarCheese\""
        )
    );
}

#[test]
fn metric_name_texts() {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    use crate::gofmt::SelectorStyle;

    let sel = LabelSelector {
        match_labels: Some(BTreeMap::from([(
            "queue".to_owned(),
            "worker_tasks".to_owned(),
        )])),
        match_expressions: None,
    };
    assert_eq!(
        metric_names::external("qps", Some(&sel), SelectorStyle::GoGoString),
        "external metric qps(&LabelSelector{MatchLabels:map[string]string{queue: worker_tasks,},MatchExpressions:[]LabelSelectorRequirement{},})"
    );
    assert_eq!(
        metric_names::external("qps", None, SelectorStyle::GoGoString),
        "external metric qps(nil)"
    );
    assert_eq!(metric_names::object("Service", "rps"), "Service metric rps");
    assert_eq!(metric_names::pods("qps"), "pods metric qps");
    assert_eq!(metric_names::resource("memory"), "memory resource");
    assert_eq!(
        metric_names::resource_utilization("cpu"),
        "cpu resource utilization (percentage of request)"
    );
    assert_eq!(
        metric_names::container_resource_utilization("cpu"),
        "cpu container resource utilization (percentage of request)"
    );
}

#[test]
fn go_time_strings() {
    assert_eq!(go_time_string(None), "0001-01-01 00:00:00 +0000 UTC");
    assert_eq!(
        go_time_string(Some("2025-06-01T12:00:00.5Z".parse().unwrap())),
        "2025-06-01 12:00:00.5 +0000 UTC"
    );
}

#[test]
fn metric_labels() {
    let r = ok(5, "x");
    assert_eq!(
        (r.action_label(3), r.error_label()),
        (ActionLabel::ScaleUp, ErrorLabel::None)
    );
    let mut f = failed(MetricFailureReason::InvalidMetricSourceType, "e", "e");
    if let Err(x) = &mut f.outcome {
        x.kind = ErrorKind::Spec;
    }
    assert_eq!(
        (f.action_label(3), f.error_label()),
        (ActionLabel::None, ErrorLabel::Spec)
    );
    let (e, err) = status_update_failure("web", "forbidden");
    assert_eq!(e.reason(), "FailedUpdateStatus");
    assert_eq!(err, "failed to update status for web: forbidden");
}
