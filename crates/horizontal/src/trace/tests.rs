//! Traces of every branch, built from the pure decision core exactly as the reconcile
//! builds them: `decide`, then `complete`, then [`DecisionTrace::new`].

use std::collections::BTreeSet;

use hpa_replica_calculator::{CalculationDetail, PodGroups};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HPAScalingPolicy, HPAScalingRules, HorizontalPodAutoscaler,
    HorizontalPodAutoscalerBehavior, HorizontalPodAutoscalerSpec, MetricSpec, MetricStatus,
    MetricTarget, MetricValueStatus, ResourceMetricSource, ResourceMetricStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::explain::render_text;
use hpa_decision::conditions::MetricFailureReason;
use hpa_decision::decision::{
    DecisionConfig, DecisionInput, MetricFailure, MetricProposal, MetricResult, MetricsOutcome,
    decide,
};
use hpa_decision::state::HpaState;
use hpa_decision::tolerance::Tolerances;

fn now() -> Timestamp {
    "2026-01-01T12:00:00Z".parse().unwrap()
}

fn cpu_spec(utilization: i32) -> MetricSpec {
    MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource {
            name: "cpu".into(),
            target: MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(utilization),
                ..Default::default()
            },
        }),
        ..Default::default()
    }
}

fn hpa(
    min: i32,
    max: i32,
    metrics: Vec<MetricSpec>,
    behavior: Option<HorizontalPodAutoscalerBehavior>,
) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            ..Default::default()
        },
        spec: HorizontalPodAutoscalerSpec {
            min_replicas: Some(min),
            max_replicas: max,
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: "web".into(),
            },
            behavior,
            metrics: Some(metrics),
        },
        status: None,
    }
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

fn cpu_result(replicas: i32, utilization: i32, ratio: f64, groups: PodGroups) -> MetricResult {
    MetricResult {
        metric_type: "Resource".into(),
        status: MetricStatus {
            type_: "Resource".into(),
            resource: Some(ResourceMetricStatus {
                name: "cpu".into(),
                current: MetricValueStatus {
                    average_utilization: Some(utilization),
                    ..Default::default()
                },
            }),
            ..Default::default()
        },
        outcome: Ok(MetricProposal {
            replicas,
            metric_name: "cpu resource utilization (percentage of request)".into(),
            timestamp: Some(now()),
            detail: Some(CalculationDetail {
                usage_ratio: ratio,
                pods: Some(groups),
                ..Default::default()
            }),
        }),
    }
}

fn external_result(replicas: i32, values: Vec<i64>, ready: Option<i64>) -> MetricResult {
    MetricResult {
        metric_type: "External".into(),
        status: MetricStatus {
            type_: "External".into(),
            ..Default::default()
        },
        outcome: Ok(MetricProposal {
            replicas,
            metric_name: "external metric queue(nil)".into(),
            timestamp: None,
            detail: Some(CalculationDetail {
                usage_ratio: 3.0,
                ready_pods: ready,
                values,
                ..Default::default()
            }),
        }),
    }
}

fn failed_external() -> MetricResult {
    MetricResult {
        metric_type: "External".into(),
        status: MetricStatus::default(),
        outcome: Err(MetricFailure {
            reason: MetricFailureReason::FailedGetExternalMetric,
            condition_error: "unable to get external metric".into(),
            error: "failed to get queue external metric value: unable to get external metric"
                .into(),
            kind: hpa_decision::labels::ErrorKind::Internal,
            source: None,
        }),
    }
}

/// Decide and render as the reconcile does (the scale write succeeds when asked for).
fn trace_of(
    state: &HpaState,
    h: &HorizontalPodAutoscaler,
    current: i32,
    at: Timestamp,
    results: Option<Vec<MetricResult>>,
) -> DecisionTrace {
    let metrics = results.map(|r| MetricsOutcome::from_results(current, r));
    trace_of_outcome(state, h, current, at, metrics)
}

fn trace_of_outcome(
    state: &HpaState,
    h: &HorizontalPodAutoscaler,
    current: i32,
    at: Timestamp,
    metrics: Option<MetricsOutcome>,
) -> DecisionTrace {
    let d = decide(
        state,
        &DecisionConfig::default(),
        DecisionInput {
            key: "default/web",
            hpa: h,
            current_replicas: current,
            now: at,
            tolerances: Some(Tolerances {
                scale_down: 0.1,
                scale_up: 0.1,
            }),
        },
        metrics,
    );
    let rescale = if d.rescale {
        RescaleResult::Succeeded
    } else {
        RescaleResult::NotAttempted
    };
    let previous = h.status.clone().unwrap_or_default();
    let outcome = d.complete(state, &previous, rescale.clone());
    let trace = DecisionTrace::new(
        &d,
        &outcome,
        TraceContext {
            hpa: h,
            status_replicas: current,
            rescale: &rescale,
            shadow: false,
        },
    );
    // The JSON shape round-trips, and the text renders.
    let json = serde_json::to_string(&trace).unwrap();
    assert_eq!(serde_json::from_str::<DecisionTrace>(&json).unwrap(), trace);
    assert!(!render_text(&trace, None).is_empty());
    trace
}

#[test]
fn resource_metric_scale_up_records_measurement_pods_and_writes() {
    let state = HpaState::new();
    let h = hpa(1, 10, vec![cpu_spec(50)], None);
    let groups = PodGroups {
        ready_pod_count: 2,
        unready_pods: set(&["web-3"]),
        missing_pods: set(&["web-4"]),
        ignored_pods: set(&["web-5"]),
        reasons: [("web-5".to_owned(), "being deleted")]
            .into_iter()
            .collect(),
    };
    let t = trace_of(
        &state,
        &h,
        2,
        now(),
        Some(vec![cpu_result(4, 100, 2.0, groups)]),
    );
    assert_eq!(t.version, TRACE_VERSION);
    assert_eq!(t.branch, "FromMetrics");
    let m = &t.metrics[0];
    assert_eq!((m.type_.as_str(), m.name.as_str()), ("Resource", "cpu"));
    assert_eq!(m.target.as_ref().unwrap().average_utilization, Some(50));
    assert_eq!(m.current.as_ref().unwrap().average_utilization, Some(100));
    assert_eq!(m.usage_ratio, Some(2.0));
    assert_eq!(m.within_tolerance, Some(false));
    let pods = m.pods.as_ref().unwrap();
    assert_eq!(pods.ready, 2);
    assert_eq!(pods.unready[0].name, "web-3");
    assert_eq!(pods.unready[0].why, WHY_UNREADY);
    assert_eq!(pods.missing[0].why, WHY_MISSING);
    assert_eq!(pods.ignored[0].why, "being deleted");
    assert_eq!(m.proposal, Some(4));
    assert_eq!(t.winner.as_ref().unwrap().index, 0);
    assert_eq!(t.prenormalized, Some(4));
    let rl = t.rate_limit.as_ref().unwrap();
    assert_eq!((rl.kind.as_str(), rl.limit), ("legacy", Some(4)));
    assert_eq!(t.clamp.bound_by.as_deref(), Some("DesiredWithinRange"));
    assert_eq!(t.desired_replicas, 4);
    assert_eq!(t.write.scale, "succeeded");
    assert!(t.write.status_changed);
    assert_eq!(t.events[0].reason, "SuccessfulRescale");
    assert!(
        t.conditions
            .iter()
            .any(|c| c.type_ == "AbleToScale" && c.reason == "SucceededRescale")
    );
    let text = render_text(&t, Some((0, 1)));
    assert!(text.contains("[0] Resource cpu"), "{text}");
    assert!(
        text.contains("2 ready, 1 unready, 1 missing, 1 ignored"),
        "{text}"
    );
    assert!(text.contains("<- the largest, used"), "{text}");
    assert!(text.contains("scale: 2 -> 4"), "{text}");
}

#[test]
fn pod_names_are_bounded_and_counts_whole() {
    let state = HpaState::new();
    let h = hpa(1, 10, vec![cpu_spec(50)], None);
    let many: Vec<String> = (0..120).map(|i| format!("web-{i:03}")).collect();
    let groups = PodGroups {
        ready_pod_count: 1,
        missing_pods: many.iter().cloned().collect(),
        ..Default::default()
    };
    let t = trace_of(
        &state,
        &h,
        2,
        now(),
        Some(vec![cpu_result(4, 100, 2.0, groups)]),
    );
    let p = t.metrics[0].pods.as_ref().unwrap();
    assert_eq!((p.missing.len(), p.missing_count), (PODS_NAMED, 120));
    assert!(render_text(&t, None).contains(" and 70 more"));
}

#[test]
fn the_largest_metric_wins_and_external_values_are_kept() {
    let state = HpaState::new();
    let h = hpa(1, 20, vec![cpu_spec(50), MetricSpec::default()], None);
    let t = trace_of(
        &state,
        &h,
        4,
        now(),
        Some(vec![
            cpu_result(5, 60, 1.2, PodGroups::default()),
            external_result(7, vec![1000, 2000], Some(4)),
        ]),
    );
    let w = t.winner.unwrap();
    assert_eq!((w.index, w.replicas), (1, 7));
    assert_eq!(t.metrics[1].values_milli, vec![1000, 2000]);
    assert_eq!(t.metrics[1].ready_pods, Some(4));
    assert_eq!(t.desired_replicas, 7);
}

#[test]
fn a_failed_metric_is_traced_with_its_reason() {
    let state = HpaState::new();
    let h = hpa(1, 10, vec![MetricSpec::default()], None);
    let t = trace_of(&state, &h, 3, now(), Some(vec![failed_external()]));
    let e = t.metrics[0].error.as_ref().unwrap();
    assert_eq!(e.reason, "FailedGetExternalMetric");
    assert!(
        t.metrics_error
            .as_ref()
            .unwrap()
            .contains("invalid metrics (1 invalid out of 1)")
    );
    assert!(t.winner.is_none() && t.stabilization.is_none());
    // status.desiredReplicas is left as it was (no status before).
    assert_eq!(t.desired_replicas, 0);
    assert_eq!(t.write.scale, "notAttempted");
    assert!(t.error.is_some());
    let reasons: Vec<&str> = t.events.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(
        reasons,
        vec!["FailedGetExternalMetric", "FailedComputeMetricsReplicas"]
    );
    assert!(render_text(&t, None).contains("FAILED (FailedGetExternalMetric)"));
}

#[test]
fn stabilization_window_recommendations_and_the_one_applied() {
    let state = HpaState::new();
    let h = hpa(1, 10, vec![cpu_spec(50)], None);
    let earlier = now() - SignedDuration::from_mins(2);
    // First decision at 6 (ratio within tolerance keeps 6), then the load drops.
    trace_of(
        &state,
        &h,
        6,
        earlier,
        Some(vec![cpu_result(6, 50, 1.0, PodGroups::default())]),
    );
    let t = trace_of(
        &state,
        &h,
        6,
        now(),
        Some(vec![cpu_result(2, 15, 0.3, PodGroups::default())]),
    );
    let st = t.stabilization.as_ref().unwrap();
    assert_eq!((st.up_window_seconds, st.down_window_seconds), (0, 300));
    assert!(
        st.recommendations
            .iter()
            .any(|r| r.replicas == 6 && r.time == earlier && r.in_down_window)
    );
    assert_eq!(st.stabilized, 6);
    assert_eq!(st.reason, "ScaleDownStabilized");
    assert_eq!(t.prenormalized, Some(2));
    assert_eq!(t.desired_replicas, 6);
    assert!(render_text(&t, None).contains("applied: 6 (ScaleDownStabilized)"));
}

fn policy(type_: &str, value: i32, period: i32) -> HPAScalingPolicy {
    HPAScalingPolicy {
        type_: type_.into(),
        value,
        period_seconds: period,
    }
}

#[test]
fn each_behavior_policy_limit_and_the_binding_one() {
    let state = HpaState::new();
    let behavior = HorizontalPodAutoscalerBehavior {
        scale_up: Some(HPAScalingRules {
            policies: Some(vec![policy("Pods", 2, 60), policy("Percent", 50, 60)]),
            select_policy: Some("Min".into()),
            stabilization_window_seconds: Some(0),
            tolerance: None,
        }),
        scale_down: Some(HPAScalingRules {
            policies: Some(vec![policy("Pods", 1, 60)]),
            select_policy: None,
            stabilization_window_seconds: Some(0),
            tolerance: None,
        }),
    };
    let h = hpa(1, 50, vec![cpu_spec(50)], Some(behavior));
    // Scale up 10 -> 30: Pods allows 12, Percent 15, Min picks 12.
    let t = trace_of(
        &state,
        &h,
        10,
        now(),
        Some(vec![cpu_result(30, 150, 3.0, PodGroups::default())]),
    );
    let rl = t.rate_limit.as_ref().unwrap();
    assert_eq!(rl.kind, "behavior");
    assert_eq!(rl.direction, "scaleUp");
    assert_eq!(rl.select_policy.as_deref(), Some("Min"));
    let limits: Vec<(String, Option<i32>)> = rl
        .policies
        .iter()
        .map(|p| (p.type_.clone(), p.limit))
        .collect();
    assert_eq!(
        limits,
        vec![("Pods".into(), Some(12)), ("Percent".into(), Some(15))]
    );
    assert_eq!(rl.limit, Some(12));
    // Min picks the Pods policy: it is the one that bound the result.
    let selected: Vec<bool> = rl.policies.iter().map(|p| p.selected).collect();
    assert_eq!(selected, vec![true, false]);
    assert_eq!(t.clamp.bound_by.as_deref(), Some("ScaleUpLimit"));
    assert_eq!(t.desired_replicas, 12);

    // Scale down 12 -> 3 a minute later: the scale-up event of 2 is in the period, so
    // the period starts at 10 and Pods 1 allows 9.
    let t = trace_of(
        &state,
        &h,
        12,
        now() + SignedDuration::from_secs(1),
        Some(vec![cpu_result(3, 10, 0.2, PodGroups::default())]),
    );
    let rl = t.rate_limit.as_ref().unwrap();
    assert_eq!(rl.direction, "scaleDown");
    assert_eq!(rl.policies[0].period_start, 10);
    assert_eq!(rl.policies[0].limit, Some(9));
    assert_eq!(t.clamp.bound_by.as_deref(), Some("ScaleDownLimit"));
    assert_eq!(t.desired_replicas, 9);
    let text = render_text(&t, None);
    assert!(
        text.contains("Pods 1 per 60s: 10 replicas at the period's start -> at most 9"),
        "{text}"
    );
}

#[test]
fn legacy_limit_and_max_clamp() {
    let state = HpaState::new();
    // 3 -> 50 without behavior: 2x/4 gives 6.
    let h = hpa(1, 100, vec![cpu_spec(50)], None);
    let t = trace_of(
        &state,
        &h,
        3,
        now(),
        Some(vec![cpu_result(50, 800, 16.0, PodGroups::default())]),
    );
    assert_eq!(t.rate_limit.as_ref().unwrap().limit, Some(6));
    assert_eq!(t.clamp.bound_by.as_deref(), Some("ScaleUpLimit"));
    assert_eq!(t.desired_replicas, 6);
    // maxReplicas below the 2x limit: TooManyReplicas.
    let state = HpaState::new();
    let h = hpa(1, 5, vec![cpu_spec(50)], None);
    let t = trace_of(
        &state,
        &h,
        4,
        now(),
        Some(vec![cpu_result(7, 90, 1.8, PodGroups::default())]),
    );
    assert_eq!(t.clamp.bound_by.as_deref(), Some("TooManyReplicas"));
    assert_eq!(t.desired_replicas, 5);
    // minReplicas above the proposal, no window to hold it: TooFewReplicas. (Without
    // `spec.behavior` the downscale window always holds at least the current count.)
    let state = HpaState::new();
    let behavior = HorizontalPodAutoscalerBehavior {
        scale_up: None,
        scale_down: Some(HPAScalingRules {
            stabilization_window_seconds: Some(0),
            ..Default::default()
        }),
    };
    let h = hpa(3, 10, vec![cpu_spec(50)], Some(behavior));
    let t = trace_of(
        &state,
        &h,
        3,
        now(),
        Some(vec![cpu_result(1, 10, 0.2, PodGroups::default())]),
    );
    assert_eq!(t.clamp.bound_by.as_deref(), Some("TooFewReplicas"));
    assert_eq!(t.desired_replicas, 3);
}

#[test]
fn branches_without_metrics() {
    let h = hpa(2, 5, vec![cpu_spec(50)], None);
    let t = trace_of(&HpaState::new(), &h, 8, now(), None);
    assert_eq!(t.branch, "AboveMax");
    assert_eq!(
        (t.desired_replicas, t.rescale_reason.as_str()),
        (5, "Current number of replicas above Spec.MaxReplicas")
    );
    let t = trace_of(&HpaState::new(), &h, 1, now(), None);
    assert_eq!((t.branch.as_str(), t.desired_replicas), ("BelowMin", 2));
    let t = trace_of(&HpaState::new(), &h, 0, now(), None);
    assert_eq!(t.branch, "ScalingDisabled");
    assert_eq!(t.write.scale, "notAttempted");
    assert!(
        t.conditions
            .iter()
            .any(|c| c.type_ == "ScalingActive" && c.reason == "ScalingDisabled")
    );
    assert!(render_text(&t, None).contains("autoscaling is disabled"));
}

#[test]
fn store_keeps_ten_per_hpa_and_forgets_deleted_ones() {
    let store = TraceStore::new();
    let h = hpa(1, 10, vec![cpu_spec(50)], None);
    let state = HpaState::new();
    let mut last = None;
    for i in 0..13 {
        let mut t = trace_of(
            &state,
            &h,
            2,
            now() + SignedDuration::from_secs(i),
            Some(vec![cpu_result(2, 50, 1.0, PodGroups::default())]),
        );
        t.hpa = "default/web".into();
        last = Some(t.clone());
        store.record(t);
    }
    // Kept encoded, read back whole.
    assert_eq!(store.latest_of("default/web"), last);
    let kept = store.get("default/web");
    assert_eq!(kept.len(), TRACES_PER_HPA);
    assert_eq!(kept[0].time, now() + SignedDuration::from_secs(3));
    assert_eq!(store.latest().len(), 1);
    store.forget("default/web");
    assert!(store.is_empty());
}

#[test]
fn a_shadowed_rescale_renders_as_written_but_stores_no_scale_event() {
    let state = HpaState::new();
    let h = hpa(
        1,
        10,
        vec![cpu_spec(50)],
        Some(HorizontalPodAutoscalerBehavior::default()),
    );
    let metrics =
        MetricsOutcome::from_results(2, vec![cpu_result(4, 100, 2.0, PodGroups::default())]);
    let d = decide(
        &state,
        &DecisionConfig::default(),
        DecisionInput {
            key: "default/web",
            hpa: &h,
            current_replicas: 2,
            now: now(),
            tolerances: None,
        },
        Some(metrics),
    );
    let outcome = d.complete(&state, &Default::default(), RescaleResult::Shadowed);
    assert_eq!(outcome.desired_replicas, 4);
    assert_eq!(outcome.events[0].reason(), "SuccessfulRescale");
    assert!(state.scale_up_events("default/web").is_empty());
    let t = DecisionTrace::new(
        &d,
        &outcome,
        TraceContext {
            hpa: &h,
            status_replicas: 2,
            rescale: &RescaleResult::Shadowed,
            shadow: true,
        },
    );
    assert_eq!(t.write.scale, "shadow");
    assert!(render_text(&t, None).contains("scale: 2 -> 4 decided, not written"));
    // A real write stores it.
    let outcome = d.complete(&state, &Default::default(), RescaleResult::Succeeded);
    assert_eq!(outcome.desired_replicas, 4);
    assert_eq!(state.scale_up_events("default/web").len(), 1);
}

#[test]
fn a_scale_target_that_cannot_be_read_is_traced() {
    let h = hpa(1, 10, vec![cpu_spec(50)], None);
    let mut status = k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerStatus::default();
    let err = "deployments.apps \"web\" not found";
    hpa_decision::conditions::set_condition(
        status.conditions.get_or_insert_with(Vec::new),
        &hpa_decision::conditions::HpaCondition::FailedGetScale { err: err.into() },
        now(),
    );
    let event = hpa_decision::events::HpaEvent::FailedGetScale { err: err.into() };
    let t = DecisionTrace::failed_get_scale(
        "default/web",
        &h,
        now(),
        err,
        &status,
        true,
        &event,
        false,
    );
    assert_eq!(t.branch, "FailedGetScale");
    assert!(!t.target.read);
    assert_eq!(t.conditions[0].reason, "FailedGetScale");
    assert_eq!(t.events[0].reason, "FailedGetScale");
    let json = serde_json::to_string(&t).unwrap();
    assert_eq!(serde_json::from_str::<DecisionTrace>(&json).unwrap(), t);
    let text = render_text(&t, None);
    assert!(text.contains("its scale could not be read"), "{text}");
    assert!(text.contains("event Warning FailedGetScale"), "{text}");
}

#[test]
fn a_paused_decision_names_the_annotation_and_writes_nothing() {
    let state = HpaState::new();
    let mut h = hpa(2, 10, vec![cpu_spec(50)], None);
    let annotate = |h: &mut HorizontalPodAutoscaler, pairs: &[(&str, &str)]| {
        h.metadata.annotations = Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
    };
    annotate(&mut h, &[(hpa_decision::pause::PAUSED, "true")]);
    let cpu = || Some(vec![cpu_result(6, 150, 1.5, PodGroups::default())]);
    let t = trace_of(&state, &h, 4, now(), cpu());
    let p = t.pause.as_ref().unwrap();
    assert_eq!(
        (p.annotation.as_str(), p.pinned_replicas),
        ("kube-hpa-controller.io/paused", None)
    );
    assert_eq!((t.rescale, t.desired_replicas), (false, 4));
    assert_eq!(t.write.scale, "notAttempted");
    assert_eq!(t.metrics[0].proposal, Some(6), "the metrics are still read");
    assert_eq!(
        (t.stabilization.as_ref(), t.rate_limit.as_ref()),
        (None, None)
    );
    let text = render_text(&t, None);
    assert!(
        text.contains("Paused: kube-hpa-controller.io/paused is true, the scale is not written"),
        "{text}"
    );
    assert!(
        text.contains("condition AbleToScale=False ScalingPaused: scaling is paused by the annotation kube-hpa-controller.io/paused"),
        "{text}"
    );

    // Pinned below minReplicas (clamped), with an invalid `paused` beside it.
    annotate(
        &mut h,
        &[
            (hpa_decision::pause::PAUSED, "yes"),
            (hpa_decision::pause::PAUSED_REPLICAS, "1"),
        ],
    );
    let t = trace_of(&state, &h, 4, now(), cpu());
    let p = t.pause.as_ref().unwrap();
    assert_eq!(
        (p.requested_replicas, p.pinned_replicas),
        (Some(1), Some(2))
    );
    assert_eq!((t.rescale, t.desired_replicas), (true, 2));
    assert_eq!(t.invalid_annotations.len(), 1);
    assert_eq!(t.invalid_annotations[0].value, "yes");
    assert_eq!(
        t.events
            .iter()
            .map(|e| e.reason.as_str())
            .collect::<Vec<_>>(),
        vec!["InvalidAnnotation", "SuccessfulRescale"]
    );
    let text = render_text(&t, None);
    assert!(
        text.contains("Paused: kube-hpa-controller.io/paused-replicas 1 pins the target to 2 replicas (clamped"),
        "{text}"
    );
    assert!(
        text.contains(
            "Ignored: annotation kube-hpa-controller.io/paused has the invalid value \"yes\""
        ),
        "{text}"
    );
    assert!(text.contains("scale: 4 -> 2"), "{text}");

    // Not paused: no pause in the trace, none in its JSON.
    h.metadata.annotations = None;
    let t = trace_of(&state, &h, 2, now(), cpu());
    assert!(t.pause.is_none() && t.invalid_annotations.is_empty());
    let json = serde_json::to_value(&t).unwrap();
    assert!(json.get("pause").is_none() && json.get("invalidAnnotations").is_none());
}

/// [`trace_of`], with the HPA's metric fallbacks: the failures counted in `state` and the
/// metrics aggregated with them, as the reconcile does.
fn trace_with_fallbacks(
    state: &HpaState,
    h: &HorizontalPodAutoscaler,
    current: i32,
    at: Timestamp,
    results: Vec<MetricResult>,
) -> DecisionTrace {
    let fallbacks = hpa_decision::fallback::fallback_annotation(h).fallbacks;
    let statuses = state.observe_metric_failures("default/web", at, &fallbacks, &results, true);
    let d = decide(
        state,
        &DecisionConfig::default(),
        DecisionInput {
            key: "default/web",
            hpa: h,
            current_replicas: current,
            now: at,
            tolerances: None,
        },
        Some(MetricsOutcome::with_fallbacks(current, results, statuses)),
    );
    let rescale = if d.rescale {
        RescaleResult::Succeeded
    } else {
        RescaleResult::NotAttempted
    };
    let outcome = d.complete(
        state,
        &h.status.clone().unwrap_or_default(),
        rescale.clone(),
    );
    let t = DecisionTrace::new(
        &d,
        &outcome,
        TraceContext {
            hpa: h,
            status_replicas: current,
            rescale: &rescale,
            shadow: false,
        },
    );
    let json = serde_json::to_string(&t).unwrap();
    assert_eq!(serde_json::from_str::<DecisionTrace>(&json).unwrap(), t);
    t
}

#[test]
fn a_metric_fallback_is_traced_and_explained() {
    let state = HpaState::new();
    let queue = MetricSpec {
        type_: "External".into(),
        external: Some(k8s_openapi::api::autoscaling::v2::ExternalMetricSource {
            metric: k8s_openapi::api::autoscaling::v2::MetricIdentifier {
                name: "queue_depth".into(),
                selector: None,
            },
            target: MetricTarget {
                type_: "AverageValue".into(),
                average_value: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                    "5".into(),
                )),
                ..Default::default()
            },
        }),
        ..Default::default()
    };
    let mut h = hpa(1, 20, vec![cpu_spec(50), queue], None);
    h.metadata.annotations = Some(
        [(
            hpa_decision::fallback::METRIC_FALLBACK.to_owned(),
            r#"[{"metric": "External/queue_depth", "failures": 2, "replicas": 10}]"#.to_owned(),
        )]
        .into(),
    );
    let failed = || MetricResult {
        metric_type: "External".into(),
        status: MetricStatus::default(),
        outcome: Err(MetricFailure {
            reason: MetricFailureReason::FailedGetExternalMetric,
            condition_error: "unable to get external metric default/queue_depth/nil: down".into(),
            error: "failed to get queue_depth external metric value: down".into(),
            kind: hpa_decision::labels::ErrorKind::Internal,
            source: None,
        }),
    };
    let cpu = || cpu_result(4, 50, 1.0, PodGroups::default());
    // The first failure: counted, not in effect.
    let t = trace_with_fallbacks(&state, &h, 4, now(), vec![cpu(), failed()]);
    let f = t.metrics[1].fallback.as_ref().unwrap();
    assert_eq!(
        (f.failures, f.replicas, f.failed_reads, f.in_effect),
        (Some(2), Some(10), 1, false)
    );
    assert!(t.metrics[0].fallback.is_none());
    assert!(!t.fallback_in_effect());
    let text = render_text(&t, None);
    assert!(
        text.contains(
            "fallback (10 replicas at 2 failed reads in a row): not in effect yet, failing since 2026-01-01T12:00:00Z (1 failed read in a row)"
        ),
        "{text}"
    );
    // The second: in effect, the metric proposes 10 and wins; the read's failure is kept.
    let at = now() + SignedDuration::from_secs(15);
    let t = trace_with_fallbacks(&state, &h, 4, at, vec![cpu(), failed()]);
    assert!(t.fallback_in_effect());
    let m = &t.metrics[1];
    assert_eq!(
        (m.proposal, m.proposal_name.as_deref()),
        (Some(10), Some("External/queue_depth (fallback)"))
    );
    assert_eq!(
        m.error.as_ref().map(|e| e.reason.as_str()),
        Some("FailedGetExternalMetric")
    );
    assert_eq!(
        m.fallback.as_ref().unwrap().transition.as_deref(),
        Some("activated")
    );
    assert_eq!(t.winner.as_ref().map(|w| w.index), Some(1));
    assert_eq!(t.metrics_error, None);
    let text = render_text(&t, None);
    for want in [
        "FAILED (FailedGetExternalMetric): failed to get queue_depth external metric value: down",
        "fallback (10 replicas) in effect from this read: failing since 2026-01-01T12:00:00Z (2 failed reads in a row)",
        "[1] External/queue_depth (fallback): 10 replicas  <- the largest, used",
        "condition MetricFallbackActive=True FallbackInEffect",
        "event Normal MetricFallbackActivated: fallback activated for spec.metrics[1] (External/queue_depth)",
    ] {
        assert!(text.contains(want), "{want}\n{text}");
    }
    let json = serde_json::to_value(&t).unwrap();
    assert_eq!(
        json["metrics"][1]["fallback"],
        serde_json::json!({"failures": 2, "replicas": 10, "firstFailure": "2026-01-01T12:00:00Z",
            "failedReads": 2, "inEffect": true, "transition": "activated"})
    );
    assert!(json["metrics"][0].get("fallback").is_none());
    // Read again: cleared.
    let at = now() + SignedDuration::from_secs(30);
    let t = trace_with_fallbacks(&state, &h, 8, at, vec![cpu(), cpu()]);
    assert!(!t.fallback_in_effect());
    let text = render_text(&t, None);
    assert!(
        text.contains(
            "fallback (10 replicas at 2 failed reads in a row): cleared, the metric was read again"
        ),
        "{text}"
    );
    assert!(!text.contains("earlier failed reads"), "{text}");
    // Computed by `hpactl explain` without the controller's history: it says the count is
    // its own.
    let mut fresh = t;
    fresh.without_history = true;
    let text = render_text(&fresh, None);
    assert!(
        text.contains("Nor does it know a failing metric's earlier failed reads"),
        "{text}"
    );
}

/// `kube-hpa-controller.io/sync-period` is in the trace and `hpactl explain` when valid, and
/// under `invalidAnnotations` when not; the decision is the same either way.
#[test]
fn a_sync_period_annotation_is_traced_and_explained() {
    let with = |value: &str| {
        let mut h = hpa(1, 10, vec![cpu_spec(50)], None);
        h.metadata.annotations = Some(
            [(
                hpa_decision::sync_period::SYNC_PERIOD.to_owned(),
                value.to_owned(),
            )]
            .into(),
        );
        trace_of(
            &HpaState::new(),
            &h,
            2,
            now(),
            Some(vec![cpu_result(4, 100, 2.0, PodGroups::default())]),
        )
    };
    let t = with("5s");
    assert_eq!(t.sync_period_seconds, Some(5));
    assert!(t.invalid_annotations.is_empty());
    assert_eq!(t.desired_replicas, 4);
    let text = render_text(&t, None);
    assert!(
        text.contains("Sync period: 5s by the annotation kube-hpa-controller.io/sync-period"),
        "{text}"
    );
    let json = serde_json::to_value(&t).unwrap();
    assert_eq!(json["syncPeriodSeconds"], 5);

    let t = with("0s");
    assert_eq!(t.sync_period_seconds, None);
    assert_eq!(t.invalid_annotations.len(), 1);
    assert_eq!(t.desired_replicas, 4);
    assert!(!render_text(&t, None).contains("Sync period:"));
    assert!(
        serde_json::to_value(&t)
            .unwrap()
            .get("syncPeriodSeconds")
            .is_none()
    );
}

/// `kube-hpa-controller.io/pod-selection-strategy` is in the trace and `hpactl explain` with
/// the pods it left out, and under `invalidAnnotations` when its value is not valid.
#[test]
fn a_pod_selection_strategy_is_traced_and_explained() {
    let with = |value: &str, left_out: Option<Vec<String>>| {
        let mut h = hpa(1, 10, vec![cpu_spec(50)], None);
        h.metadata.annotations = Some(
            [(
                hpa_decision::pod_selection::POD_SELECTION_STRATEGY.to_owned(),
                value.to_owned(),
            )]
            .into(),
        );
        let mut m =
            MetricsOutcome::from_results(2, vec![cpu_result(4, 100, 2.0, PodGroups::default())]);
        m.excluded_pods = left_out;
        trace_of_outcome(&HpaState::new(), &h, 2, now(), Some(m))
    };
    let t = with(
        "OwnerReferences",
        Some(vec!["scraper-x7k2q".into(), "debug".into()]),
    );
    let p = t.pod_selection.as_ref().unwrap();
    assert_eq!(p.strategy, "OwnerReferences");
    assert_eq!(p.excluded_pods, ["scraper-x7k2q", "debug"]);
    assert!(t.pods_left_out());
    let text = render_text(&t, None);
    assert!(
        text.contains("Pod selection: OwnerReferences by the annotation kube-hpa-controller.io/pod-selection-strategy: only the target's own pods count; left out, matched by its selector but not owned by it (2): scraper-x7k2q, debug"),
        "{text}"
    );
    let json = serde_json::to_value(&t).unwrap();
    assert_eq!(
        json["podSelection"],
        serde_json::json!({"strategy": "OwnerReferences", "excludedPods": ["scraper-x7k2q", "debug"]})
    );

    let t = with("OwnerReferences", Some(Vec::new()));
    assert!(!t.pods_left_out());
    assert!(render_text(&t, None).contains("every pod its selector matched is its own"));
    assert_eq!(
        serde_json::to_value(&t).unwrap()["podSelection"],
        serde_json::json!({"strategy": "OwnerReferences"})
    );

    // The owners could not be read (the metrics failed before any pod was counted).
    let t = with("OwnerReferences", None);
    assert!(t.pod_selection.as_ref().unwrap().owners_unknown);
    assert!(t.pods_left_out());
    assert!(render_text(&t, None).contains("the pods' owners could not be read"));
    assert_eq!(
        serde_json::to_value(&t).unwrap()["podSelection"],
        serde_json::json!({"strategy": "OwnerReferences", "ownersUnknown": true})
    );

    let t = with("LabelSelector", None);
    assert!(render_text(&t, None).contains("Pod selection: LabelSelector"));
    assert!(!t.pods_left_out());

    let t = with("owner", None);
    assert_eq!(t.pod_selection, None);
    assert_eq!(t.invalid_annotations.len(), 1);
    assert_eq!(
        t.invalid_annotations[0].annotation,
        hpa_decision::pod_selection::POD_SELECTION_STRATEGY
    );
    assert!(!render_text(&t, None).contains("Pod selection:"));
    assert!(
        serde_json::to_value(&t)
            .unwrap()
            .get("podSelection")
            .is_none()
    );
}

/// Ten steady-state traces of one HPA are kept compressed together: a few KB, not the 22 KB
/// of their JSON.
#[test]
fn ten_traces_of_one_hpa_take_a_few_kilobytes() {
    let store = TraceStore::new();
    let h = hpa(1, 10, vec![cpu_spec(50)], None);
    let state = HpaState::new();
    let mut json = 0;
    for i in 0..TRACES_PER_HPA as i64 {
        let mut t = trace_of(
            &state,
            &h,
            2,
            now() + SignedDuration::from_secs(15 * i),
            Some(vec![cpu_result(
                2,
                50 + (i % 3) as i32,
                1.0,
                PodGroups::default(),
            )]),
        );
        t.hpa = "default/web".into();
        json += serde_json::to_vec(&t).unwrap().len() + 1;
        store.record(t);
    }
    let block = store.traces.get("default/web").unwrap().len();
    assert!(json > 15_000, "{json} bytes of JSON");
    assert!(block < 2_500, "{block} bytes kept for {json} bytes of JSON");
    assert_eq!(store.get("default/web").len(), TRACES_PER_HPA);
}

/// A block that does not decompress (or claims more than the guard allows) reads as no
/// traces, and the next record starts the HPA's traces afresh; nothing panics.
#[test]
fn a_corrupt_block_reads_as_none_and_is_replaced() {
    let store = TraceStore::new();
    let h = hpa(1, 10, vec![cpu_spec(50)], None);
    let trace = |i| {
        let mut t = trace_of(
            &HpaState::new(),
            &h,
            2,
            now() + SignedDuration::from_secs(i),
            Some(vec![cpu_result(2, 50, 1.0, PodGroups::default())]),
        );
        t.hpa = "default/web".into();
        t
    };
    let mut huge = (u32::MAX).to_le_bytes().to_vec();
    huge.extend_from_slice(b"\x10x");
    for bad in [
        b"\xff\xff".to_vec(),
        b"\x20\x00\x00\x00\xff\xff\xff\xff".to_vec(),
        huge,
    ] {
        store
            .traces
            .insert("default/web".into(), bad.clone().into_boxed_slice());
        assert!(store.get("default/web").is_empty(), "{bad:?}");
        assert_eq!(store.latest_of("default/web"), None);
        store.record(trace(1));
        assert_eq!(store.get("default/web"), vec![trace(1)]);
    }
}
